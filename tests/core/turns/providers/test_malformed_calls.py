"""Parsing never raises for what a model wrote: a call whose ``function`` is not an object
(OpenAI, Mistral, Ollama, and their streams), fields of the wrong type, arguments nested too
deep, numbers JSON does not have, become calls with an error saying so; what the model sent is
echoed back cut short and escaped. Only a response that is not an object raises."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from expediter.core.records.calls import ToolCall
from expediter.core.records.text import ECHO_LIMIT
from expediter.core.turns.providers.base import MAX_DEPTH, Malformed, parse_arguments
from expediter.core.turns.toolset import Toolset
from expediter.errors import ArgumentError, UnknownProvider

CHAT_SHAPED = ("openai", "mistral", "ollama")
NOT_OBJECTS = [("now", "string"), (["now", "{}"], "array"), (7, "number"), (True, "boolean")]


def response(provider: str, *tool_calls: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": list(tool_calls)}
    if provider == "ollama":
        return {"model": "qwen3:8b", "message": message, "done": True}
    return {"choices": [{"index": 0, "message": message}]}


@pytest.mark.parametrize("provider", CHAT_SHAPED)
@pytest.mark.parametrize(("function", "kind"), NOT_OBJECTS)
def test_a_function_that_is_not_an_object_is_a_call_with_an_error(
    toolset: Toolset, provider: str, function: Any, kind: str
) -> None:
    good = {"id": "c2", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    bad = {"id": "c1", "type": "function", "function": function}

    first, second = toolset.parse_calls(provider, response(provider, bad, good))

    assert first.tool is None
    assert first.arguments == {}
    assert first.error is not None
    assert f'"function" must be an object with "name" and "arguments", not {kind}' in first.error
    if provider != "ollama":  # Ollama's calls carry no id
        assert first.call_id == "c1"
    assert (second.tool, second.action, second.error) == ("clock", "now", None)


@pytest.mark.parametrize("provider", CHAT_SHAPED)
def test_a_malformed_call_is_answered_so_the_model_sees_every_call_id(
    toolset: Toolset, provider: str
) -> None:
    calls = toolset.parse_calls(provider, response(provider, {"id": "c1", "function": "now"}))
    events = list(toolset.run(calls))

    assert [(event.call_id, event.status) for event in events] == [(calls[0].call_id, "error")]
    (message,) = toolset.result_messages(provider, calls, events)
    assert message["role"] == "tool"


def test_malformed_arguments_read_as_their_problem() -> None:
    assert parse_arguments(None) == ({}, None)
    assert parse_arguments(Malformed("what went wrong")) == ({}, "what went wrong")


@pytest.mark.parametrize("function", ["now", ["now"], 3])
def test_a_streamed_function_that_is_not_an_object_is_a_call_with_an_error(
    toolset: Toolset, function: Any
) -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1"}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": function}]}}]},
        {"choices": [{"index": 0, "delta": "not an object"}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "x", "id": "c1"}]}}]},
    ]

    (call,) = toolset.parse_stream("openai", chunks)

    assert call.call_id == "c1"
    assert call.error is not None
    assert '"function" must be an object' in call.error


def test_anthropic_stream_events_of_the_wrong_shape_are_skipped(toolset: Toolset) -> None:
    events = [
        {"type": "content_block_start", "index": 0, "content_block": "tool_use"},
        {"type": "content_block_delta", "index": "first", "delta": ["partial"]},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "now", "input": {}},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta"}},
        {"type": "content_block_stop", "index": 1},
    ]

    (call,) = toolset.parse_stream("anthropic", events)

    assert (call.call_id, call.tool, call.action, call.error) == ("t1", "clock", "now", None)


# -- hostile arguments ---------------------------------------------------------------------------

#: Providers whose arguments arrive as JSON text, and those that hand them already decoded.
AS_TEXT = ("openai", "openai-responses", "mistral")
DECODED = ("anthropic", "gemini", "ollama")


def one_call(provider: str, arguments: Any, name: str = "now", call_id: Any = "c1") -> Any:
    """A response of ``provider`` making one call, its fields exactly as given."""
    if provider in ("openai", "mistral"):
        function = {"name": name, "arguments": arguments}
        return response(provider, {"id": call_id, "type": "function", "function": function})
    if provider == "ollama":
        return response(provider, {"function": {"name": name, "arguments": arguments}})
    if provider == "openai-responses":
        item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
        return {"object": "response", "output": [item]}
    if provider == "anthropic":
        block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        return {"type": "message", "role": "assistant", "content": [block]}
    assert provider == "gemini"
    return {
        "candidates": [
            {"content": {"parts": [{"functionCall": {"name": name, "args": arguments}}]}}
        ]
    }


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def parse_one(toolset: Toolset, provider: str, arguments: Any, **fields: Any) -> ToolCall:
    (call,) = toolset.parse_calls(provider, one_call(provider, arguments, **fields))
    return call


@pytest.mark.parametrize("provider", AS_TEXT)
@pytest.mark.parametrize(
    "text",
    ['{"a": ' * 10_000 + "1" + "}" * 10_000, '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"],
    ids=["objects", "arrays"],
)
def test_arguments_nested_ten_thousand_deep_are_an_argument_error(
    toolset: Toolset, provider: str, text: str
) -> None:
    call = parse_one(toolset, provider, text)
    assert (call.action, call.arguments) == ("now", {})
    assert call.error == f"now: the arguments nest more than {MAX_DEPTH} levels deep"


@pytest.mark.parametrize("provider", DECODED)
def test_decoded_arguments_nested_too_deep_are_an_argument_error(
    toolset: Toolset, provider: str
) -> None:
    # Gemini and Ollama calls carry no id: the one made up from the call must not recurse.
    call = parse_one(toolset, provider, nested(10_000))
    assert call.error == f"now: the arguments nest more than {MAX_DEPTH} levels deep"
    assert len(call.call_id) > 0


@pytest.mark.parametrize("provider", [*AS_TEXT, *DECODED])
def test_arguments_nested_to_the_limit_are_read_and_one_more_level_is_not(
    toolset: Toolset, provider: str
) -> None:
    def sent(depth: int) -> Any:
        value = nested(depth - 1)  # the arguments object itself is the first level
        return json.dumps(value) if provider in AS_TEXT else value

    fine = parse_one(toolset, provider, sent(MAX_DEPTH))
    assert (fine.error, fine.arguments) == (None, nested(MAX_DEPTH - 1))
    deep = parse_one(toolset, provider, sent(MAX_DEPTH + 1))
    assert deep.error is not None
    assert "levels deep" in deep.error


@pytest.mark.parametrize("provider", AS_TEXT)
def test_an_integer_of_five_thousand_digits_is_an_argument_error(
    toolset: Toolset, provider: str
) -> None:
    call = parse_one(toolset, provider, '{"timezone": ' + "7" * 5000 + "}")
    assert call.error == "now: the arguments hold an integer too long to read"


@pytest.mark.parametrize("provider", AS_TEXT)
def test_numbers_json_does_not_have_are_an_argument_error(toolset: Toolset, provider: str) -> None:
    for literal in ("NaN", "Infinity", "-Infinity", "1e999"):
        call = parse_one(toolset, provider, '{"timezone": ' + literal + "}")
        assert call.arguments == {}
        assert call.error is not None
        assert call.error.startswith("now: the arguments are not valid JSON (")
        assert literal in call.error


@pytest.mark.parametrize("provider", DECODED)
def test_decoded_arguments_holding_nan_or_infinity_are_an_argument_error(
    toolset: Toolset, provider: str
) -> None:
    for number in (math.nan, math.inf, -math.inf):
        call = parse_one(toolset, provider, {"timezone": "UTC", "offsets": [1, number]})
        assert call.arguments == {}
        assert call.error == f"now: the arguments hold {number}, which is not a JSON number"


@pytest.mark.parametrize("provider", DECODED)
def test_decoded_arguments_with_values_json_does_not_have_are_an_argument_error(
    toolset: Toolset, provider: str
) -> None:
    assert "which JSON does not have" in (parse_one(toolset, provider, {"a": {1, 2}}).error or "")
    assert "names must be strings" in (parse_one(toolset, provider, {"a": {1: 2}}).error or "")
    assert "too long" in (parse_one(toolset, provider, {"a": 10**5000}).error or "")


def test_parse_arguments_refuses_what_python_reads_but_json_does_not_have() -> None:
    assert parse_arguments('{"a": 1.5, "b": [1, {"c": null}]}') == (
        {"a": 1.5, "b": [1, {"c": None}]},
        None,
    )
    for text in ('{"a": NaN}', '{"a": 1e400}', '{"a": ' + "1" * 4301 + "}", "[" * 5000):
        arguments, problem = parse_arguments(text)
        assert arguments == {}
        assert problem is not None


# -- fields of the wrong type ----------------------------------------------------------------------


@pytest.mark.parametrize("provider", [*AS_TEXT, *DECODED])
def test_a_name_that_is_not_text_is_a_call_with_an_error(toolset: Toolset, provider: str) -> None:
    for name, kind in [(["now"], "array"), ({"n": 1}, "object"), (7, "number")]:
        call = parse_one(toolset, provider, "{}" if provider in AS_TEXT else {}, name=name)
        assert (call.name, call.tool, call.arguments) == ("", None, {})
        assert call.error == (
            f'the call could not be read: the call\'s "name" must be a string, not {kind}'
        )


@pytest.mark.parametrize("provider", ["openai", "mistral", "openai-responses", "anthropic"])
def test_call_ids_are_kept_as_given_an_integer_as_its_digits(
    toolset: Toolset, provider: str
) -> None:
    arguments = "{}" if provider in AS_TEXT else {}
    assert parse_one(toolset, provider, arguments, call_id="call_\ud800\x00").call_id == (
        "call_\ud800\x00"
    )
    call = parse_one(toolset, provider, arguments, call_id=7)
    assert (call.call_id, call.error) == ("7", None)


@pytest.mark.parametrize("provider", ["openai", "mistral", "openai-responses", "anthropic"])
def test_an_id_that_is_not_text_is_a_call_with_an_error_and_a_made_up_id(
    toolset: Toolset, provider: str
) -> None:
    kinds = [({"a": 1}, "object"), ([1], "array"), (1.5, "number"), (2**70, "number")]
    for call_id, kind in kinds:
        call = parse_one(toolset, provider, "{}" if provider in AS_TEXT else {}, call_id=call_id)
        assert re.fullmatch(r"[A-Za-z0-9]{9}", call.call_id)
        assert call.tool is None
        assert call.error is not None
        assert "must be a string, not " + kind in call.error


@pytest.mark.parametrize("provider", [*AS_TEXT, *DECODED])
def test_arguments_of_the_wrong_kind_are_an_argument_error(toolset: Toolset, provider: str) -> None:
    for arguments in (5, True, ["a"], 1.5):
        call = parse_one(toolset, provider, arguments)
        assert call.action == "now"
        assert call.error is not None
        assert "the arguments must be a JSON object, not" in call.error


def test_a_gemini_thought_signature_that_is_not_text_is_a_call_with_an_error(
    toolset: Toolset,
) -> None:
    part = {"functionCall": {"name": "now", "args": {}}, "thoughtSignature": {"x": 1}}
    (call,) = toolset.parse_calls("gemini", {"candidates": [{"content": {"parts": [part]}}]})
    assert call.error is not None
    assert "thought signature must be a string, not object" in call.error


WRONG_CONTAINERS: list[dict[str, Any]] = [
    {"choices": "now"},
    {"choices": [["now"]]},
    {"choices": [{"message": ["now"]}]},
    {"choices": [{"message": {"tool_calls": {"id": "c1"}}}]},
    {"choices": [{"message": {"tool_calls": ["now", 7, None, [{}]]}}]},
    {"message": "now"},
    {"output": {"type": "function_call"}},
    {"content": "tool_use"},
    {"candidates": [{"content": {"parts": "now"}}]},
    {"candidates": [{"content": {"parts": [{"functionCall": "now"}]}}]},
]


@pytest.mark.parametrize("provider", [*AS_TEXT, *DECODED])
def test_containers_of_the_wrong_kind_hold_no_calls(toolset: Toolset, provider: str) -> None:
    for response in WRONG_CONTAINERS:
        assert toolset.parse_calls(provider, response) == []


def test_a_response_that_is_not_an_object_is_an_argument_error(toolset: Toolset) -> None:
    for value in (None, ["choices"], "choices", 7, b"{}"):
        with pytest.raises(ArgumentError, match=r"^the openai response must be a JSON object or"):
            toolset.parse_calls("openai", value)


def test_a_provider_that_is_not_a_name_is_an_unknown_provider(toolset: Toolset) -> None:
    for provider in (None, 7, ["openai"], "cohere"):
        with pytest.raises(UnknownProvider, match="unknown provider"):
            toolset.parse_calls(provider, {})


# -- streams -----------------------------------------------------------------------------------


def delta(*tool_calls: Any, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": list(tool_calls), **fields}}]}


def test_stream_chunks_of_the_wrong_shape_are_skipped(toolset: Toolset) -> None:
    chunks: list[Any] = [
        None,
        "data: [DONE]",
        7,
        ["choices"],
        {"choices": [{"index": 0, "delta": "now"}]},
        {"choices": "now"},
        delta({"index": 0, "id": "c1", "function": {"name": "now", "arguments": '{"timezone": '}}),
        delta({"index": 0, "function": {"arguments": '"UTC"}'}}, content=["not", "text"]),
    ]
    accumulator = toolset.stream("openai")
    for chunk in chunks:
        accumulator.feed(chunk)
    (call,) = toolset.parse_calls("openai", accumulator.response())
    assert (call.call_id, call.action, call.arguments, call.error) == (
        "c1",
        "now",
        {"timezone": "UTC"},
        None,
    )
    assert accumulator.response()["choices"][0]["message"]["content"] is None


def test_a_stream_index_of_any_kind_keeps_the_call_together(toolset: Toolset) -> None:
    for index in ("0", "x", None, 1.5, True, -1, 10**30, 10**5000):
        chunks = [
            delta({"index": index, "id": "c1", "function": {"name": "now", "arguments": "{"}}),
            delta({"index": index, "function": {"arguments": "}"}}),
        ]
        (call,) = toolset.parse_stream("openai", chunks)
        assert (call.call_id, call.action, call.arguments, call.error) == ("c1", "now", {}, None)


def test_streamed_fields_that_are_not_text_make_the_call_an_error(toolset: Toolset) -> None:
    chunks = [
        delta({"index": 0, "id": "c1", "function": {"name": "now", "arguments": "{"}}),
        delta({"index": 0, "function": {"arguments": {"timezone": "UTC"}}}),
        delta({"index": 1, "id": "c2", "function": {"name": ["now"], "arguments": "{}"}}),
        delta(
            {"index": 2, "id": "c3", "function": {"name": "now", "arguments": {"timezone": "UTC"}}}
        ),
        delta({"index": 3, "id": {"a": 1}, "function": {"name": "now", "arguments": "{}"}}),
    ]
    mixed, named, whole, identified = toolset.parse_stream("openai", chunks)
    assert mixed.error is not None
    assert "must be a JSON object, not array" in mixed.error
    assert named.error is not None
    assert '"name" must be a string, not array' in named.error
    # Arguments streamed as one object (not text) are read like a complete response's.
    assert (whole.call_id, whole.arguments, whole.error) == ("c3", {"timezone": "UTC"}, None)
    assert identified.error is not None
    assert '"id" must be a string, not object' in identified.error


def test_a_stream_that_is_not_a_sequence_of_chunks_is_an_argument_error(toolset: Toolset) -> None:
    for events in (None, 7, "chunks", {"choices": []}):
        with pytest.raises(ArgumentError, match="a stream is a sequence of chunks"):
            toolset.parse_stream("openai", events)


def test_anthropic_stream_fields_of_the_wrong_kind_never_raise(toolset: Toolset) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    events: list[Any] = [
        None,
        "ping",
        {"type": "message_start", "message": ["x"]},
        {
            "type": "content_block_start",
            "index": "0",
            "content_block": {"type": "text", "text": ""},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ["x"]}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": 10**5000},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "now", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": deep},
        },
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "t2", "name": "now", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": ' + "1" * 5000 + "}"},
        },
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "t3", "name": "now", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": "{"},
        },
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": {"a": 1}},
        },
        {"type": "message_delta", "delta": "end"},
    ]
    too_deep, too_long, mixed = toolset.parse_stream("anthropic", events)
    assert too_deep.error == f"now: the arguments nest more than {MAX_DEPTH} levels deep"
    assert too_long.error == "now: the arguments hold an integer too long to read"
    assert mixed.error is not None
    assert "must be a JSON object" in mixed.error


# -- what is echoed back ---------------------------------------------------------------------------


def test_a_huge_unknown_name_is_echoed_cut_short(toolset: Toolset) -> None:
    name = "x" * 1_000_000
    (call,) = toolset.parse_calls("openai", one_call("openai", "{}", name=name))
    assert call.name == name  # the call keeps what the model sent
    assert call.error is not None
    assert len(call.error) < 400
    assert f"[{1_000_000 - ECHO_LIMIT} more characters]" in call.error
    for _ in range(3):  # the third attempt gets the directive to stop
        (event,) = toolset.run([call])
        assert event.error is not None
        assert len(event.error) < 1_000
        assert "more characters" in event.error
    assert "Stop calling" in event.error
    (message,) = toolset.result_messages("openai", [call], [event])
    assert len(message["content"]) < 1_000


def test_control_characters_in_an_unknown_name_are_escaped(toolset: Toolset) -> None:
    (call,) = toolset.parse_calls("openai", one_call("openai", "{}", name="now\x1b[2J\x00"))
    (event,) = toolset.run([call])
    for text in (call.error, event.error):
        assert text is not None
        assert "\x1b" not in text
        assert "\x00" not in text
        assert "\\x1b[2J\\x00" in text
