"""The arguments check: the quick path never calls an invalid call valid, and every invalid
call is refused with jsonschema's words."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expediter import ArgumentsCheck
from expediter.errors import ArgumentError

KINDS = ["string", "integer", "number", "boolean", "null"]

scalar_schemas = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(KINDS), st.lists(st.sampled_from(KINDS), min_size=1))},
    optional={
        "enum": st.lists(st.text(max_size=3), max_size=3),
        "minimum": st.integers(-5, 5),
        "maximum": st.one_of(st.integers(-5, 5), st.floats(-5, 5)),
        "exclusiveMinimum": st.integers(-5, 5),
        "exclusiveMaximum": st.integers(-5, 5),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "format": st.just("int32"),
        "description": st.text(max_size=5),
        # Keywords the quick check does not know: jsonschema decides.
        "pattern": st.just("^a"),
        "multipleOf": st.just(2),
    },
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10),
    st.floats(-10, 10, allow_nan=False),
    st.text(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(
    properties=st.dictionaries(st.sampled_from("abc"), scalar_schemas, min_size=1),
    required=st.lists(st.sampled_from("abc"), max_size=2, unique=True),
    arguments=st.dictionaries(st.sampled_from("abcd"), values, max_size=4),
)
def test_the_quick_check_agrees_with_jsonschema(
    properties: dict[str, Any], required: list[str], arguments: dict[str, Any]
) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    check = ArgumentsCheck("act", schema)
    valid = jsonschema.Draft202012Validator(schema).is_valid(arguments)
    if check._certainly_valid(arguments):
        assert valid, (schema, arguments)
    if valid:
        check(arguments)
    else:
        with pytest.raises(ArgumentError):
            check(arguments)


def test_a_wrong_type_names_the_argument() -> None:
    check = ArgumentsCheck(
        "get_pet", {"type": "object", "properties": {"petId": {"type": "integer"}}}
    )
    with pytest.raises(ArgumentError) as caught:
        check({"petId": "many"})
    assert caught.value.parameter == "petId"
    assert str(caught.value) == "get_pet: argument petId: 'many' is not of type 'integer'"


def test_nested_schemas_go_to_jsonschema() -> None:
    schema = {
        "type": "object",
        "properties": {"body": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    check = ArgumentsCheck("create", schema)
    assert not check._certainly_valid({"body": {"n": 1}})
    check({"body": {"n": 1}})
    with pytest.raises(ArgumentError) as caught:
        check({"body": {"n": "x"}})
    assert "body.n" in str(caught.value)


def test_a_huge_value_is_not_repeated_whole() -> None:
    check = ArgumentsCheck("a", {"type": "object", "properties": {"n": {"type": "integer"}}})
    with pytest.raises(ArgumentError) as caught:
        check({"n": "x" * 100_000})
    assert len(str(caught.value)) < 400
