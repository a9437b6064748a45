"""``expediter.ArgumentsCheck``: a tool's own check of its arguments against a JSON Schema,
which a hostile schema cannot turn against the host (no reference fetched, a reference loop
or a broken schema leaves the arguments unchecked, patterns left to the server on request)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

import expediter
from expediter.errors import ArgumentError

ArgumentsCheck = expediter.ArgumentsCheck


def test_a_bad_argument_names_it() -> None:
    check = ArgumentsCheck("add", {"type": "object", "properties": {"a": {"type": "integer"}}})
    with pytest.raises(ArgumentError) as caught:
        check({"a": "one"})
    assert str(caught.value) == "add: argument a: 'one' is not of type 'integer'"
    assert caught.value.parameter == "a"
    check({"a": 1})


@pytest.mark.parametrize("extra", [True, False])
def test_a_flat_schema_with_additional_properties_says_yes_quickly(extra: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer", "title": "A"}},
        "required": ["a"],
        "additionalProperties": extra,
    }
    check = ArgumentsCheck("add", schema)
    assert check._certainly_valid({"a": 1})
    assert not check._certainly_valid({"a": 1, "b": 2})  # jsonschema decides that one
    if extra:
        check({"a": 1, "b": 2})
    else:
        with pytest.raises(ArgumentError, match="'b' was unexpected"):
            check({"a": 1, "b": 2})


def test_a_reference_outside_the_schema_is_never_fetched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(1)
    listening.settimeout(1.5)
    connected: list[Any] = []

    def accept() -> None:
        try:
            connected.append(listening.accept()[0])
        except OSError:
            pass

    waiter = threading.Thread(target=accept)
    waiter.start()
    url = f"http://127.0.0.1:{listening.getsockname()[1]}/schema.json"
    schema = {"type": "object", "properties": {"x": {"$ref": url}}}
    check = ArgumentsCheck("remote", schema)
    with caplog.at_level("WARNING"):
        check({"x": 1})  # unchecked, not an error
        check({"x": 2})
    waiter.join()
    for connection in connected:
        connection.close()
    listening.close()
    assert connected == []
    assert caplog.text.count("the arguments of remote go unchecked") == 1


def test_a_reference_loop_leaves_the_arguments_unchecked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema = {
        "type": "object",
        "$defs": {"node": {"$ref": "#/$defs/node"}},
        "properties": {"x": {"$ref": "#/$defs/node"}},
    }
    check = ArgumentsCheck("looped", schema)
    with caplog.at_level("WARNING"):
        check({"x": 1})
    assert check.unusable == "breaks the validator (RecursionError)"
    assert "the arguments of looped go unchecked" in caplog.text


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"type": 5}}},
        {"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}},
        {"type": "object", "properties": {"x": {"minimum": "zero"}}},
    ],
)
def test_a_broken_schema_is_never_a_crash(schema: dict[str, Any]) -> None:
    ArgumentsCheck("odd", schema)({"x": "y"})


def test_without_pattern_checks_a_hostile_pattern_costs_nothing() -> None:
    schema = {
        "type": "object",
        "properties": {
            "x": {"type": "string", "pattern": "^(a+)+$"},
            "nested": {"type": "array", "items": {"type": "string", "pattern": "^(a+)+$"}},
            # A property called "pattern" is a property, not the keyword.
            "pattern": {"type": "integer"},
        },
        "patternProperties": {"^(b+)+$": {"type": "integer"}},
        "additionalProperties": False,
        "required": ["x"],
    }
    check = ArgumentsCheck("hostile", schema, check_patterns=False)
    near_miss = "a" * 28 + "!"
    started = time.monotonic()
    check({"x": near_miss, "nested": [near_miss], "b" * 28 + "!": 1})
    assert time.monotonic() - started < 2
    with pytest.raises(ArgumentError, match="argument pattern"):
        check({"x": "a", "pattern": "not a number"})
    with pytest.raises(ArgumentError, match="'x' is a required property"):
        check({})
    # With patterns checked (a schema the operator trusts), they count.
    with pytest.raises(ArgumentError, match="does not match"):
        ArgumentsCheck("trusted", schema)({"x": "b"})
