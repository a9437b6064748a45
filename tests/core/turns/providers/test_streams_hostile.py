"""Streams a hostile stranger would send: messages the provider would accept whatever the
model streamed, and calls that read as the complete response's."""

from __future__ import annotations

import json
from typing import Any

import pydantic
from support.streams import chat_chunk

from expediter.core.turns.toolset import Toolset


def fragment(**fields: Any) -> dict[str, Any]:
    return chat_chunk({"tool_calls": [fields]})


def test_anthropic_citations_that_are_not_a_list_never_raise(toolset: Toolset) -> None:
    events = [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": "", "citations": 5},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": {"type": "char_location"}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ]
    stream = toolset.stream("anthropic").feed_all(events)
    assert stream.calls() == []
    assert stream.message()["content"][0]["citations"] == [{"type": "char_location"}]


def test_the_anthropic_message_carries_the_ids_its_results_answer(toolset: Toolset) -> None:
    from anthropic.types import MessageParam

    events = [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "name": "now", "input": {}},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": 7, "name": "now", "input": {}},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_stop"},
    ]
    stream = toolset.stream("anthropic").feed_all(events)
    calls = stream.calls()
    message = stream.message()
    assert [block["id"] for block in message["content"]] == [call.call_id for call in calls]
    pydantic.TypeAdapter(MessageParam).validate_python(message)
    (reply,) = toolset.result_messages("anthropic", calls, [])
    assert [r["tool_use_id"] for r in reply["content"]] == [b["id"] for b in message["content"]]


def test_the_chat_message_sends_arguments_as_json_text_whatever_was_streamed(
    toolset: Toolset,
) -> None:
    from openai.types.chat import ChatCompletionAssistantMessageParam

    chunks = [
        fragment(index=0, id="a", function={"name": "now", "arguments": b"\xff"}),
        fragment(index=1, id="b", function={"name": "now", "arguments": {"timezone": "UTC"}}),
        fragment(index=1, function={"arguments": "x"}),
        fragment(index=2, id="c", function={"name": "now", "arguments": {"timezone": "UTC"}}),
        fragment(index=3, id="d", function="now"),
        fragment(index=4, id="e", function={"name": 5, "arguments": "{}"}),
        chat_chunk({}, "tool_calls"),
    ]
    stream = toolset.stream("openai").feed_all(chunks)
    calls = stream.calls()
    assert [c.error is None for c in calls] == [False, False, True, False, False]
    message = stream.message()
    json.dumps(message, allow_nan=False)
    functions = [item["function"] for item in message["tool_calls"]]
    assert [f["arguments"] for f in functions] == ["{}", "{}", '{"timezone": "UTC"}', "{}", "{}"]
    assert all(type(f["name"]) is str for f in functions)
    assert [item["id"] for item in message["tool_calls"]] == [c.call_id for c in calls]
    pydantic.TypeAdapter(ChatCompletionAssistantMessageParam).validate_python(message)


def test_the_responses_message_sends_arguments_as_json_text(toolset: Toolset) -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "now", "arguments": ""}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": b"\xff",
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": "{}",
        },
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ]
    stream = toolset.stream("openai-responses").feed_all(events)
    (call,) = stream.calls()
    assert call.error is not None
    message = stream.message()
    json.dumps(message, allow_nan=False)
    assert message["output"][0]["arguments"] == "{}"
    assert message["output"][0]["call_id"] == call.call_id


def test_pieces_without_index_or_id_continue_the_call_begun_with_an_index(
    toolset: Toolset,
) -> None:
    chunks = [
        fragment(index=0, id="a", type="function", function={"name": "now", "arguments": ""}),
        fragment(function={"arguments": '{"timezone": '}),
        fragment(id=None, function={"arguments": '"UTC"}'}),
        chat_chunk({}, "tool_calls"),
    ]
    (call,) = toolset.parse_stream("openai", chunks)
    assert (call.call_id, call.name, call.arguments, call.error) == (
        "a",
        "now",
        {"timezone": "UTC"},
        None,
    )


def test_a_responses_arguments_done_event_without_arguments_keeps_the_streamed_ones(
    toolset: Toolset,
) -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "now", "arguments": ""}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "delta": '{"timezone"',
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ': "UTC"}'},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0},
    ]
    (call,) = toolset.parse_stream("openai-responses", events)
    assert (call.arguments, call.error) == ({"timezone": "UTC"}, None)


def test_a_gemini_stream_of_several_candidates_follows_the_first(toolset: Toolset) -> None:
    def chunk(index: int, *parts: dict[str, Any]) -> dict[str, Any]:
        return {
            "candidates": [{"index": index, "content": {"role": "model", "parts": list(parts)}}]
        }

    chunks = [
        chunk(0, {"text": "Hel"}),
        chunk(1, {"text": "Other"}, {"functionCall": {"name": "think", "args": {"thought": "x"}}}),
        chunk(0, {"text": "lo", "thoughtSignature": "c2ln"}),
        chunk(0, {"functionCall": {"name": "now", "args": {}}, "thoughtSignature": "c2lnMg=="}),
    ]
    stream = toolset.stream("gemini").feed_all(chunks)
    assert stream.text() == "Hello"
    assert [call.name for call in stream.calls()] == ["now"]
    assert stream.message()["parts"][0] == {"text": "Hello", "thoughtSignature": "c2ln"}


def test_a_responses_delta_naming_another_item_is_not_added_to_the_item_at_its_index(
    toolset: Toolset,
) -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "now", "arguments": ""}
    delta = "response.function_call_arguments.delta"
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": delta, "item_id": "fc_1", "output_index": 0, "delta": '{"timezone": '},
        {"type": delta, "item_id": "fc_9", "output_index": 0, "delta": '{"other": '},
        {"type": delta, "item_id": "fc_1", "output_index": 0, "delta": '"UTC"}'},
    ]
    (call,) = toolset.parse_stream("openai-responses", events)
    assert (call.arguments, call.error) == ({"timezone": "UTC"}, None)
