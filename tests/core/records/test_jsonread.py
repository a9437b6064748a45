"""How deep a document may nest: counted in its text, the same on every Python version."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from expediter.core.records.jsonread import MAX_DOCUMENT_DEPTH, nests_deeper


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("text", "deeper"),
    [
        (nested(MAX_DOCUMENT_DEPTH), False),
        (nested(MAX_DOCUMENT_DEPTH + 1), True),
        ("[" * (MAX_DOCUMENT_DEPTH + 1) + "]" * (MAX_DOCUMENT_DEPTH + 1), True),
        ("[" * 100_000, True),  # not JSON (never closed): measured all the same
        ("[]" * 10_000, False),  # many brackets, none inside another
        (json.dumps({"text": "[" * 10_000}), False),  # brackets inside a string
        (json.dumps({"text": '\\"' + "{" * 10_000}), False),  # after an escaped quote
        ('["\\\\", ' + "[" * 300 + "]" * 300 + "]", True),  # an escaped backslash ends
    ],
)
def test_nests_deeper_counts_brackets_outside_strings(text: str, deeper: bool) -> None:
    assert nests_deeper(text, MAX_DOCUMENT_DEPTH) is deeper


def test_nests_deeper_measures_a_span() -> None:
    text = "[1, " + nested(300) + "]"
    assert nests_deeper(text, 256)
    assert not nests_deeper(text, 256, 0, 4)
    assert nests_deeper(text, 256, 4, len(text) - 1)


def depth_of(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), children, max_size=3)
    ),
    max_leaves=40,
)


@given(json_values, st.integers(min_value=0, max_value=12))
def test_nests_deeper_agrees_with_the_decoded_value(value: object, limit: int) -> None:
    assert nests_deeper(json.dumps(value), limit) is (depth_of(value) > limit)
