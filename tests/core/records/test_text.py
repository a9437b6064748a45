"""Safe text: control characters, JSON text, and the one truncation helper every copy uses
(the model's copy, the event's display copy, the ledger's copy, the CLI's table cells)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from expediter.cli.output import shorten
from expediter.core.calls import results
from expediter.core.records import text
from expediter.core.records.calls import DISPLAY_LIMIT, display_copy
from expediter.core.records.text import (
    clean_text,
    json_text,
    model_copy,
    one_line,
    sanitize,
    truncate,
)

_COUNT = re.compile(r"\[(\d+) more characters\]$")


def test_text_that_fits_is_returned_whole() -> None:
    assert truncate("short", 5) == "short"
    assert truncate("", 0) == ""


def test_a_cut_keeps_the_beginning_and_names_how_many_characters_were_left_out() -> None:
    cut = truncate("a" * 100 + "b" * 100, 60)
    assert len(cut) <= 60
    assert cut.startswith("a" * 30)
    count = _COUNT.search(cut)
    assert count is not None
    kept = len(cut) - len(count.group(0)) - len(" ... ")
    assert kept + int(count.group(1)) == 200


def test_a_tail_share_keeps_the_end_too() -> None:
    cut = truncate("h" * 500 + "t" * 500, 90, " [{} cut] ", tail=1 / 3)
    assert len(cut) <= 90
    head, _, rest = cut.partition(" [")
    assert set(head) == {"h"}
    assert rest.endswith("t" * (len(head) // 2))


@given(st.text(max_size=300), st.integers(min_value=0, max_value=200), st.sampled_from([0, 0.5]))
def test_a_cut_never_exceeds_its_limit_once_the_marker_fits(
    value: str, limit: int, tail: float
) -> None:
    marker = " ... [{} more characters]"
    cut = truncate(value, limit, marker, tail=tail)
    if len(value) <= limit:
        assert cut == value
    elif limit >= len(marker.format(len(value))):
        assert len(cut) <= limit


@given(st.text(alphabet='"\\\x01\n\u2028ab', max_size=400), st.integers(60, 200))
def test_an_encoded_cut_fits_its_limit_after_escaping(value: str, limit: int) -> None:
    encode = json.JSONEncoder(ensure_ascii=False).encode
    cut = truncate(value, limit, " [{} dropped]", encode=encode)
    assert len(cut) <= limit
    decoded = json.loads(cut)
    if len(encode(value)) <= limit:
        assert decoded == value
    else:
        dropped = re.search(r" \[(\d+) dropped\]$", decoded)
        assert dropped is not None
        assert len(decoded) - len(dropped.group(0)) + int(dropped.group(1)) == len(value)


def test_model_copy_is_json_text_with_head_and_tail() -> None:
    assert model_copy({"a": "é"}, 100) == '{"a": "é"}'
    assert [model_copy(value, 10) for value in (None, True, 7, "x")] == ["null", "true", "7", "x"]
    cut = model_copy("H" * 3000 + "T" * 3000, 1000)
    assert len(cut) <= 1000
    assert cut.startswith("H" * 600)
    assert cut.endswith("T" * 300)
    assert "characters omitted" in cut


def test_display_copy_leaves_short_values_and_scalars_alone() -> None:
    value = {"rows": [1, 2, 3]}
    assert display_copy(value) is value
    assert display_copy(12.5) == 12.5
    long = display_copy(["x" * 100] * 100)
    assert isinstance(long, str)
    assert len(long) <= DISPLAY_LIMIT
    assert long.startswith('["xxx')
    assert _COUNT.search(long)


def test_shorten_collapses_whitespace_and_ends_with_an_ellipsis() -> None:
    assert shorten("a  b\n c", 10) == "a b c"
    assert shorten("abcdefghij", 5) == "abcd…"
    assert shorten("abc", 0) == "…"


def test_sanitize_and_clean_text_remove_control_characters_but_keep_whitespace() -> None:
    assert sanitize({"k\x00": ["a\x07b", 1]}) == {"k": ["ab", 1]}
    assert clean_text("tab\tnew\nline\x1b[31m") == "tab\tnew\nline[31m"


def test_json_text_never_uses_repr() -> None:
    assert json_text({"a": [1, None]}) == '{"a": [1, null]}'


@pytest.mark.parametrize("name", ["clean_text", "model_copy", "sanitize"])
def test_the_executor_still_finds_the_text_helpers_in_results(name: str) -> None:
    assert getattr(results, name) is getattr(text, name)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "port 1 failed: Connection refused\n\tIs the server running on that host?\n",
            "port 1 failed: Connection refused. Is the server running on that host?",
        ),
        ("first:\n  second\n\n  Third", "first: second. Third"),
        ("a sentence wrapped\n  mid-way", "a sentence wrapped mid-way"),
        ("one  line\twith   runs", "one line with runs"),
        ("ends.\nnext", "ends. next"),
        ("", ""),
        ("\n\n", ""),
    ],
)
def test_one_line_keeps_each_line_apart_from_the_next(text: str, line: str) -> None:
    assert one_line(text) == line
