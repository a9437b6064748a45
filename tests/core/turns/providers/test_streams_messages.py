"""What a stream gives back besides its calls: the assistant message in each provider's shape
(Anthropic's signed thinking and tool_use blocks, Gemini's parts with their thought signatures,
Responses' output items), and hostile events for every provider that never raise."""

from __future__ import annotations

import json
import math
from typing import Any

import pydantic
import pytest
from support.streams import (
    anthropic_events,
    anthropic_final,
    gemini_chunks,
    gemini_final,
    ollama_chunks,
    ollama_final,
    responses_events,
    responses_final,
)

from expediter.core.turns.providers import get_provider
from expediter.core.turns.toolset import Toolset
from expediter.errors import UnknownProvider

CALLS = [("call_A1", "now", '{"timezone": "UTC"}'), ("call_B2", "think", '{"thought": "é😀"}')]


def test_the_anthropic_message_keeps_signed_thinking_text_and_tool_use_blocks(
    toolset: Toolset,
) -> None:
    from anthropic.types import MessageParam

    stream = toolset.stream("anthropic").feed_all(anthropic_events(CALLS, cuts=[[3], [9]]))
    message = stream.message()
    assert message == {"role": "assistant", "content": anthropic_final(CALLS)["content"]}
    assert message["content"][0]["signature"] == "EqQBCkYIBxgCKkA="
    pydantic.TypeAdapter(MessageParam).validate_python(message)
    assert stream.response() == anthropic_final(CALLS)


def test_an_anthropic_tool_use_cut_short_is_sent_back_with_an_object_input(
    toolset: Toolset,
) -> None:
    events = anthropic_events(CALLS, cuts=[[], [9]], finish=False)
    stream = toolset.stream("anthropic").feed_all(events[:-2])  # inside the second call
    assert stream.message()["content"][-1]["input"] == {}
    assert "stream ended" in (stream.calls()[-1].error or "")


def test_the_gemini_message_keeps_thought_signatures_on_their_parts(toolset: Toolset) -> None:
    from google.genai.types import Content

    calls = [("", "now", {"timezone": "UTC"}), ("", "think", {"thought": "é😀"})]
    stream = toolset.stream("gemini").feed_all(gemini_chunks(calls))
    final = gemini_final(calls)
    assert stream.message() == final["candidates"][0]["content"]
    assert stream.response()["candidates"][0]["content"] == final["candidates"][0]["content"]
    Content.model_validate(stream.message())
    first = stream.calls()[0]
    assert first.extras["thought_signature"] == "c2lnbmF0dXJlLW9uZQ=="
    # The result message sends the signature back on its part.
    (reply,) = toolset.result_messages("gemini", stream.calls(), [])
    assert reply["parts"][0]["thoughtSignature"] == "c2lnbmF0dXJlLW9uZQ=="


def test_the_responses_message_is_the_output_items_for_the_next_input(toolset: Toolset) -> None:
    stream = toolset.stream("openai-responses").feed_all(responses_events(CALLS, cuts=[[4], [7]]))
    message = stream.message()
    assert message == {"output": responses_final(CALLS)["output"]}
    assert stream.response()["output"] == responses_final(CALLS)["output"]
    assert [c.extras for c in stream.calls()] == [{"id": "fc_call_A1"}, {"id": "fc_call_B2"}]


def test_a_responses_stream_of_the_final_event_alone_gives_its_calls(toolset: Toolset) -> None:
    events = responses_events(CALLS)
    made = toolset.parse_stream("openai-responses", [events[-1]])
    assert made == toolset.parse_calls("openai-responses", responses_final(CALLS))


def test_the_ollama_message_keeps_content_thinking_and_calls(toolset: Toolset) -> None:
    import ollama

    calls = [("", "now", {"timezone": "UTC"})]
    stream = toolset.stream("ollama").feed_all(ollama_chunks(calls))
    message = stream.message()
    assert message == {
        key: ollama_final(calls)["message"][key]
        for key in ("role", "content", "thinking", "tool_calls")
    }
    ollama.Message.model_validate(message)


def test_every_built_in_provider_streams() -> None:
    for name in ("openai", "openai-responses", "anthropic", "gemini", "mistral", "ollama"):
        assert get_provider(name).streaming


def test_an_adapter_without_an_accumulator_is_unknown_provider(toolset: Toolset) -> None:
    from expediter.core.turns.providers.base import Provider

    class Quiet(Provider):
        name = "quiet"

    with pytest.raises(UnknownProvider, match="no stream accumulator"):
        Quiet().stream()


# -- hostile events, every provider -------------------------------------------------------------


def deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = {"a": [value]}
    return value


ODD: list[Any] = [None, 7, "x", math.nan, [1], deep(10_000), {"type": math.nan}, {"type": ["x"]}]


def hostile_events(provider: str) -> list[Any]:
    """Every field of every event replaced, in turn, by odd values, plus odd events."""
    valid: list[dict[str, Any]]
    if provider == "anthropic":
        valid = anthropic_events(CALLS, cuts=[[3], [5]])
    elif provider == "openai-responses":
        valid = responses_events(CALLS, cuts=[[3], [5]])
    elif provider == "gemini":
        valid = gemini_chunks([("", "now", {"timezone": "UTC"})])
    else:
        valid = ollama_chunks([("", "now", {"timezone": "UTC"})])
    out: list[Any] = list(ODD)
    for event in valid:
        for key in event:
            for odd in ODD[:5]:
                out.append({**event, key: odd})
        for key, value in event.items():
            if isinstance(value, dict):
                for inner in value:
                    out.append({**event, key: {**value, inner: 10**5000}})
                    out.append({**event, key: {**value, inner: {"index": 10**30}}})
        out.append(event)
    return out


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses", "gemini", "ollama"])
def test_hostile_events_never_raise_and_calls_are_readable(toolset: Toolset, provider: str) -> None:
    stream = toolset.stream(provider)
    for event in hostile_events(provider):
        stream.feed(event)
    for call in stream.calls():
        assert type(call.call_id) is str
        assert call.call_id
        if call.error is not None:
            assert len(call.error) < 1_000
        else:
            json.dumps(call.arguments, allow_nan=False)
    stream.message()
    stream.response()
    stream.text()
    stream.finished()
