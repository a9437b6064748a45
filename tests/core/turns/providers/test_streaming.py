"""Streamed responses: OpenAI ``tool_calls`` deltas and Anthropic ``input_json_delta`` events add
up to the same calls as the complete response, and a stream cut short is an argument error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pydantic
from support.responses import load

from expediter.core.turns.toolset import Toolset


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# -- OpenAI Chat Completions ------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-BZ3kq8XfJ2mNwY7vR1tLpQ9sDc4Ae",
        "object": "chat.completion.chunk",
        "created": 1748012345,
        "model": "gpt-4.1-2025-04-14",
        "service_tier": "default",
        "system_fingerprint": "fp_b3f1157249",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        "usage": None,
    }


def openai_chunks(response: dict[str, Any], size: int = 5) -> list[dict[str, Any]]:
    """The chunks of a streamed completion: calls 0 and 1 interleaved, then the rest."""
    message = response["choices"][0]["message"]
    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [chunk({"content": text}) for text in pieces(message["content"] or "", 9)]
    calls = message["tool_calls"]

    def opening(index: int) -> dict[str, Any]:
        call = calls[index]
        return chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )

    def fragments(index: int) -> Iterator[dict[str, Any]]:
        for text in pieces(calls[index]["function"]["arguments"], size):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]})

    chunks += [opening(0), opening(1)]
    first, second = list(fragments(0)), list(fragments(1))
    for pair in zip(first, second, strict=False):
        chunks += pair
    longer = first if len(first) > len(second) else second
    chunks += longer[min(len(first), len(second)) :]
    for index in range(2, len(calls)):
        chunks += [opening(index), *fragments(index)]
    chunks.append(chunk({}, finish_reason="tool_calls"))
    usage = {"prompt_tokens": 312, "completion_tokens": 96, "total_tokens": 408}
    chunks.append({**chunk({}), "choices": [], "usage": usage})
    return chunks


def test_openai_stream_chunks_are_valid_sdk_chunks() -> None:
    from openai.types.chat import ChatCompletionChunk

    chunks = openai_chunks(load("openai_chat.json"))
    assert len(chunks) > 30
    for item in chunks:
        ChatCompletionChunk.model_validate(item)


def test_interleaved_openai_deltas_add_up_to_the_complete_response(toolset: Toolset) -> None:
    response = load("openai_chat.json")
    streamed = toolset.parse_stream("openai", openai_chunks(response))
    assert streamed == toolset.parse_calls("openai", response)
    assert [call.name for call in streamed] == ["now", "convert", "think"]
    assert all(call.error is None for call in streamed)


def test_the_openai_accumulator_rebuilds_the_message(toolset: Toolset) -> None:
    response = load("openai_chat.json")
    accumulator = toolset.stream("openai")
    for item in openai_chunks(response, size=3):
        accumulator.feed(item)
    message = accumulator.response()["choices"][0]["message"]
    expected = response["choices"][0]["message"]
    assert message["content"] == expected["content"]
    assert [c["function"] for c in message["tool_calls"]] == [
        c["function"] for c in expected["tool_calls"]
    ]


def test_sdk_chunk_dumps_add_up_the_same(toolset: Toolset) -> None:
    from openai.types.chat import ChatCompletionChunk

    response = load("openai_chat.json")
    dumps = [ChatCompletionChunk.model_validate(c).model_dump() for c in openai_chunks(response)]
    assert toolset.parse_stream("openai", dumps) == toolset.parse_calls("openai", response)


def test_a_truncated_openai_stream_is_an_argument_error(toolset: Toolset) -> None:
    response = load("openai_chat.json")
    chunks = openai_chunks(response, size=4)
    last_fragment = max(
        i
        for i, c in enumerate(chunks)
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    )
    calls = toolset.parse_stream("openai", chunks[: last_fragment - 1])
    assert [call.name for call in calls] == ["now", "convert", "think"]
    assert calls[0].error is None
    assert calls[1].error is None
    assert calls[2].resolved
    assert calls[2].arguments == {}
    assert "the stream ended before this call was complete" in (calls[2].error or "")


def test_mistral_streams_use_the_openai_accumulator(toolset: Toolset) -> None:
    response = load("mistral_chat.json")
    chunks = [
        chunk({"tool_calls": [{**call, "index": index}]})
        for index, call in enumerate(response["choices"][0]["message"]["tool_calls"])
    ]
    assert toolset.parse_stream("mistral", chunks) == toolset.parse_calls("mistral", response)


def test_whole_mistral_calls_streamed_without_an_index_stay_apart(toolset: Toolset) -> None:
    response = load("mistral_chat.json")
    chunks = []
    for call in response["choices"][0]["message"]["tool_calls"]:
        whole = {key: value for key, value in call.items() if key != "index"}
        chunks.append(chunk({"tool_calls": [whole]}))
    assert toolset.parse_stream("mistral", chunks) == toolset.parse_calls("mistral", response)


# -- Anthropic --------------------------------------------------------------------------------


def anthropic_events(message: dict[str, Any], size: int = 6) -> list[dict[str, Any]]:
    """The server-sent events of a streamed message, as the Messages API documents them."""
    usage = message["usage"]
    start = {key: value for key, value in message.items() if key != "content"}
    start.update(
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage={**usage, "output_tokens": 1},
    )
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            for text in pieces(block["text"], size):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": text},
                    }
                )
        elif kind == "thinking":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                }
            )
            for text in pieces(block["thinking"], size * 4):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": text},
                    }
                )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                }
            )
        else:
            assert kind == "tool_use"
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": opened})
            for text in pieces(json.dumps(block["input"]), size):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": text},
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def test_anthropic_stream_events_are_valid_sdk_events() -> None:
    from anthropic.types import RawMessageStreamEvent

    events = anthropic_events(load("anthropic_messages.json"))
    assert len(events) > 40
    adapter = pydantic.TypeAdapter(RawMessageStreamEvent)
    for event in events:
        if event["type"] != "ping":
            adapter.validate_python(event)


def test_anthropic_input_json_deltas_add_up_to_the_complete_message(toolset: Toolset) -> None:
    message = load("anthropic_messages.json")
    streamed = toolset.parse_stream("anthropic", anthropic_events(message))
    assert streamed == toolset.parse_calls("anthropic", message)
    assert [call.name for call in streamed] == ["now", "convert", "think"]


def test_the_anthropic_accumulator_rebuilds_text_and_stop_reason(toolset: Toolset) -> None:
    message = load("anthropic_messages.json")
    rebuilt = toolset.stream("anthropic").feed_all(anthropic_events(message)).response()
    assert rebuilt["stop_reason"] == "tool_use"
    assert rebuilt["id"] == message["id"]
    texts = [block["text"] for block in rebuilt["content"] if block["type"] == "text"]
    assert texts == [block["text"] for block in message["content"] if block["type"] == "text"]
    uses = [block for block in rebuilt["content"] if block["type"] == "tool_use"]
    assert uses == [block for block in message["content"] if block["type"] == "tool_use"]


def test_sdk_event_dumps_add_up_the_same(toolset: Toolset) -> None:
    from anthropic.types import RawMessageStreamEvent

    message = load("anthropic_messages.json")
    adapter = pydantic.TypeAdapter(RawMessageStreamEvent)
    dumps = [
        adapter.validate_python(event).model_dump()
        for event in anthropic_events(message)
        if event["type"] != "ping"
    ]
    assert toolset.parse_stream("anthropic", dumps) == toolset.parse_calls("anthropic", message)


def test_a_tool_use_without_input_deltas_has_empty_arguments(toolset: Toolset) -> None:
    message = load("anthropic_messages.json")
    message["content"] = [
        {"type": "tool_use", "id": "toolu_01Empty", "name": "now", "input": {}},
    ]
    events = [
        e for e in anthropic_events(message) if e.get("delta", {}).get("type") != "input_json_delta"
    ]
    (call,) = toolset.parse_stream("anthropic", events)
    assert (call.call_id, call.action, call.arguments, call.error) == (
        "toolu_01Empty",
        "now",
        {},
        None,
    )


def test_a_truncated_anthropic_stream_is_an_argument_error(toolset: Toolset) -> None:
    message = load("anthropic_messages.json")
    events = anthropic_events(message)
    last = max(
        i for i, e in enumerate(events) if e.get("delta", {}).get("type") == "input_json_delta"
    )
    calls = toolset.parse_stream("anthropic", events[:last])
    assert [call.name for call in calls] == ["now", "convert", "think"]
    assert calls[0].error is None
    assert calls[1].error is None
    assert calls[2].resolved
    assert calls[2].arguments == {}
    assert "the stream ended before this call was complete" in (calls[2].error or "")
