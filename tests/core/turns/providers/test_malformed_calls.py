"""Parsing never raises for what a model wrote: a call whose ``function`` is not an object
(OpenAI, Mistral, Ollama, and their streams) becomes a call with an error saying so."""

from __future__ import annotations

from typing import Any

import pytest

from expediter.core.turns.providers.base import Malformed, parse_arguments
from expediter.core.turns.toolset import Toolset

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
    ]

    (call,) = toolset.parse_stream("anthropic", events)

    assert (call.call_id, call.tool, call.action, call.error) == ("t1", "clock", "now", None)
