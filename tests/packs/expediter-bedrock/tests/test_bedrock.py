"""The Bedrock Converse provider through a real host: tool definitions, calls read from a
``converse`` response, result messages, and ConverseStream events (split anywhere, cut short,
hostile), the streamed calls always equal to the calls of the equivalent final response."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import expediter_bedrock
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import expediter
from expediter.providers import Provider


@expediter.tool
def weather(city: str, days: int = 1) -> dict[str, Any]:
    """Forecast the weather.

    Args:
        city: Where.
        days: How many days ahead.
    """
    return {"city": city, "days": days, "sky": "clear"}


@expediter.tool
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


@pytest.fixture
def toolset(make_host: Callable[..., expediter.Host]) -> expediter.Toolset:
    host = make_host(weather, shout, expediter_bedrock)
    return host.toolset()


def response(*content: Any) -> dict[str, Any]:
    return {"output": {"message": {"role": "assistant", "content": list(content)}}}


def tool_use(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}


def summary(calls: list[expediter.ToolCall]) -> list[tuple[Any, ...]]:
    return [(c.call_id, c.name, c.tool, c.arguments, c.error) for c in calls]


# -- the adapter --------------------------------------------------------------------------------


def test_the_pack_registers_a_public_provider() -> None:
    registered: list[Any] = []
    expediter_bedrock.register_providers(registered.append)
    (adapter,) = registered
    assert isinstance(adapter, Provider)
    assert isinstance(adapter, expediter.Provider)
    assert (adapter.name, adapter.streaming, adapter.supports_strict) == ("bedrock", True, False)


def test_tools_are_tool_specs_with_the_input_schema_as_json(toolset: expediter.Toolset) -> None:
    tools = toolset.schemas("bedrock")
    assert [tool["toolSpec"]["name"] for tool in tools] == ["shout", "weather"]
    spec = tools[1]["toolSpec"]
    assert spec["description"] == "Forecast the weather."
    assert spec["inputSchema"]["json"]["properties"]["city"] == {
        "type": "string",
        "description": "Where.",
    }
    assert spec["inputSchema"]["json"]["required"] == ["city"]
    json.dumps(tools)  # plain JSON, as the request body needs


def test_a_tool_without_a_description_has_no_description_key() -> None:
    adapter = expediter_bedrock.Bedrock()
    tool = adapter.tool(expediter.providers.ToolSpec("bare", "", {"type": "object"}))
    assert tool == {"toolSpec": {"name": "bare", "inputSchema": {"json": {"type": "object"}}}}


def test_calls_are_read_from_tool_use_blocks_in_order(toolset: expediter.Toolset) -> None:
    calls = toolset.parse_calls(
        "bedrock",
        response(
            {"text": "Let me check."},
            tool_use("tooluse_a", "weather", {"city": "Oslo"}),
            tool_use("tooluse_b", "shout", {"text": "hi"}),
        ),
    )
    assert summary(calls) == [
        ("tooluse_a", "weather", "weather", {"city": "Oslo"}, None),
        ("tooluse_b", "shout", "shout", {"text": "hi"}, None),
    ]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, []),
        ({"output": None}, []),
        ({"output": {"message": {"content": "text"}}}, []),
        (response("text", 7, None, {"text": "x"}), []),
    ],
)
def test_a_response_without_calls_has_none(
    toolset: expediter.Toolset, data: dict[str, Any], expected: list[Any]
) -> None:
    assert toolset.parse_calls("bedrock", data) == expected


def test_malformed_calls_are_errors_for_the_model_never_exceptions(
    toolset: expediter.Toolset,
) -> None:
    calls = toolset.parse_calls(
        "bedrock",
        response(
            {"toolUse": "weather"},
            {"toolUse": {"name": "weather", "input": {}}},
            {"toolUse": {"toolUseId": "t3", "name": ["weather"], "input": {}}},
            tool_use("t4", "weather", [1, 2]),
            tool_use("t5", "weather", "{not json"),
            tool_use("t6", "weather", {"city": float("nan")}),
            tool_use("t7", "weather", None),
            tool_use("t8", "nope", {}),
        ),
    )
    errors = [call.error or "" for call in calls]
    assert '"toolUse" block must be an object' in errors[0]
    assert '"toolUseId" must be a non-empty string' in errors[1]
    assert (calls[2].call_id, '"name" must be a string' in errors[2]) == ("t3", True)
    assert "must be a JSON object, not array" in errors[3]
    assert "not valid JSON" in errors[4]
    assert "not a JSON number" in errors[5]
    assert (calls[6].arguments, calls[6].error) == ({}, None)
    assert "unknown function name 'nope'" in errors[7]


def test_results_go_back_as_one_user_message_of_tool_results(toolset: expediter.Toolset) -> None:
    calls = toolset.parse_calls(
        "bedrock",
        response(
            tool_use("a", "weather", {"city": "Oslo"}),
            tool_use("b", "shout", {"text": "hi"}),
            tool_use("c", "weather", "{broken"),
        ),
    )
    events = list(toolset.run(calls))
    (message,) = toolset.result_messages("bedrock", calls, events)
    assert message["role"] == "user"
    results = [block["toolResult"] for block in message["content"]]
    assert results[0] == {
        "toolUseId": "a",
        "content": [{"json": {"city": "Oslo", "days": 1, "sky": "clear"}}],
        "status": "success",
    }
    assert results[1] == {"toolUseId": "b", "content": [{"text": "HI"}], "status": "success"}
    assert results[2]["status"] == "error"
    assert "not valid JSON" in results[2]["content"][0]["text"]
    json.dumps(message)


def test_a_call_without_an_event_is_answered_with_an_error(toolset: expediter.Toolset) -> None:
    calls = toolset.parse_calls("bedrock", response(tool_use("a", "shout", {"text": "x"})))
    (message,) = toolset.result_messages("bedrock", calls, [])
    (block,) = message["content"]
    assert block["toolResult"]["status"] == "error"
    assert toolset.result_messages("bedrock", [], []) == []


# -- streams ----------------------------------------------------------------------------------


def start(index: int, call_id: str, name: str) -> dict[str, Any]:
    return {
        "contentBlockStart": {
            "start": {"toolUse": {"toolUseId": call_id, "name": name}},
            "contentBlockIndex": index,
        }
    }


def text_delta(index: int, text: str) -> dict[str, Any]:
    return {"contentBlockDelta": {"delta": {"text": text}, "contentBlockIndex": index}}


def input_delta(index: int, fragment: str) -> dict[str, Any]:
    return {
        "contentBlockDelta": {"delta": {"toolUse": {"input": fragment}}, "contentBlockIndex": index}
    }


def stop(index: int) -> dict[str, Any]:
    return {"contentBlockStop": {"contentBlockIndex": index}}


MESSAGE_START = {"messageStart": {"role": "assistant"}}
MESSAGE_STOP = {"messageStop": {"stopReason": "tool_use"}}
METADATA = {"metadata": {"usage": {"inputTokens": 10, "outputTokens": 20, "totalTokens": 30}}}


def interleaved() -> list[dict[str, Any]]:
    """Text, then two calls whose input fragments alternate."""
    return [
        MESSAGE_START,
        text_delta(0, "Checking "),
        text_delta(0, "both."),
        stop(0),
        start(1, "tooluse_a", "weather"),
        start(2, "tooluse_b", "shout"),
        input_delta(1, '{"ci'),
        input_delta(2, '{"text": "h'),
        input_delta(1, 'ty": "Zür'),
        input_delta(2, 'ey"}'),
        input_delta(1, 'ich", "days": 2}'),
        stop(2),
        stop(1),
        MESSAGE_STOP,
        METADATA,
    ]


def test_a_stream_of_two_interleaved_calls(toolset: expediter.Toolset) -> None:
    stream = toolset.stream("bedrock")
    for event in interleaved():
        stream.feed(event)
    assert stream.finished()
    assert stream.text() == "Checking both."
    assert summary(stream.calls()) == [
        ("tooluse_a", "weather", "weather", {"city": "Zürich", "days": 2}, None),
        ("tooluse_b", "shout", "shout", {"text": "hey"}, None),
    ]
    assert stream.message() == {
        "role": "assistant",
        "content": [
            {"text": "Checking both."},
            tool_use("tooluse_a", "weather", {"city": "Zürich", "days": 2}),
            tool_use("tooluse_b", "shout", {"text": "hey"}),
        ],
    }
    final = stream.response()
    assert final["stopReason"] == "tool_use"
    assert final["usage"]["totalTokens"] == 30
    assert summary(toolset.parse_calls("bedrock", final)) == summary(stream.calls())


def test_an_empty_input_is_no_arguments(toolset: expediter.Toolset) -> None:
    events = [
        start(0, "t", "shout"),
        stop(0),
        start(1, "u", "weather"),
        input_delta(1, ""),
        stop(1),
    ]
    calls = toolset.parse_stream("bedrock", events)
    assert [(call.arguments, call.error) for call in calls] == [({}, None), ({}, None)]


ARGUMENTS = '{"text": "a€😀b"}'


@pytest.mark.parametrize("offset", range(len(ARGUMENTS) + 1))
def test_input_split_at_every_character_of_multi_byte_text(
    toolset: expediter.Toolset, offset: int
) -> None:
    events = [
        start(0, "t", "shout"),
        input_delta(0, ARGUMENTS[:offset]),
        input_delta(0, ARGUMENTS[offset:]),
        stop(0),
    ]
    (call,) = toolset.parse_stream("bedrock", events)
    assert (call.arguments, call.error) == ({"text": "a€😀b"}, None)


def test_a_character_split_between_its_surrogate_halves_is_joined(
    toolset: expediter.Toolset,
) -> None:
    # Each event's JSON carried one escaped half: "\ud83d" then "\ude00".
    wire = [
        '{"contentBlockDelta": {"delta": {"toolUse": {"input": "{\\"text\\": \\"\\ud83d"}}, '
        '"contentBlockIndex": 0}}',
        '{"contentBlockDelta": {"delta": {"toolUse": {"input": "\\ude00\\"}"}}, '
        '"contentBlockIndex": 0}}',
    ]
    events = [start(0, "t", "shout"), *(json.loads(line) for line in wire), stop(0)]
    (call,) = toolset.parse_stream("bedrock", events)
    assert (call.arguments, call.error) == ({"text": "😀"}, None)


def test_a_truncated_stream_runs_the_complete_calls_only(toolset: expediter.Toolset) -> None:
    events = interleaved()[:-3]  # block 2 stopped; block 1 and the message never finished
    stream = toolset.stream("bedrock").feed_all(events)
    assert not stream.finished()
    first, second = stream.calls()
    assert first.call_id == "tooluse_a"
    assert first.arguments == {}
    assert "the stream ended before this call was complete" in (first.error or "")
    assert (second.arguments, second.error) == ({"text": "hey"}, None)
    # The conversation keeps both calls (each result needs its toolUse); the final response
    # holds only what completed, so parsing it never guesses the rest.
    assert [block.get("toolUse", {}).get("input") for block in stream.message()["content"]] == [
        None,
        {},
        {"text": "hey"},
    ]
    assert summary(toolset.parse_calls("bedrock", stream.response())) == summary([second])


HOSTILE = [
    None,
    "contentBlockDelta",
    7,
    [],
    {"contentBlockDelta": None},
    {"contentBlockDelta": []},
    {"contentBlockDelta": {"delta": {"text": "x"}}},
    {"contentBlockDelta": {"delta": {"text": "x"}, "contentBlockIndex": "0"}},
    {"contentBlockDelta": {"delta": {"text": 5}, "contentBlockIndex": 0}},
    {"contentBlockDelta": {"delta": {"toolUse": {"input": 5}}, "contentBlockIndex": 0}},
    {"contentBlockDelta": {"delta": "x", "contentBlockIndex": 10**100}},
    {"contentBlockStart": {"start": {"toolUse": "x"}, "contentBlockIndex": 3}},
    {"contentBlockStart": {"start": None, "contentBlockIndex": 4}},
    {"contentBlockStop": {"contentBlockIndex": [1]}},
    {"contentBlockStop": "x"},
    {"messageStop": []},
    {"messageStop": {"stopReason": 9}},
    {"metadata": 1},
]


@pytest.mark.parametrize("event", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_events_are_skipped_never_raised_on(toolset: expediter.Toolset, event: Any) -> None:
    stream = toolset.stream("bedrock").feed_all([*interleaved()[:-2], event, *interleaved()[-2:]])
    assert [call.call_id for call in stream.calls()] == ["tooluse_a", "tooluse_b"]
    stream.message(), stream.response(), stream.text()


def test_a_call_without_its_start_or_with_a_bad_name_is_an_error(
    toolset: expediter.Toolset,
) -> None:
    events = [
        input_delta(0, "{}"),
        stop(0),
        {
            "contentBlockStart": {
                "start": {"toolUse": {"toolUseId": "t", "name": 3}},
                "contentBlockIndex": 1,
            }
        },
        stop(1),
    ]
    first, second = toolset.parse_stream("bedrock", events)
    assert "without a toolUseId" in (first.error or "")
    assert second.call_id == "t"
    assert '"name" must be a string' in (second.error or "")


def test_a_stream_that_is_not_a_sequence_of_events_is_an_argument_error(
    toolset: expediter.Toolset,
) -> None:
    with pytest.raises(expediter.errors.ArgumentError):
        toolset.parse_stream("bedrock", {"messageStop": {}})


@st.composite
def split_stream(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Two calls' inputs cut at random places, their fragments interleaved at random, and the
    final response the same calls make."""
    values = draw(
        st.lists(
            st.fixed_dictionaries(
                {"text": st.text(max_size=12)},
                optional={"extra": st.one_of(st.integers(), st.booleans(), st.none())},
            ),
            min_size=1,
            max_size=2,
        )
    )
    fragments = []
    for index, value in enumerate(values):
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        fragments.append([input_delta(index, piece) for piece in pieces] + [stop(index)])
    events = [start(index, f"tooluse_{index}", "shout") for index in range(len(values))]
    queues = [list(queue) for queue in fragments]
    while any(queues):
        ready = [queue for queue in queues if queue]
        events.append(draw(st.sampled_from(ready)).pop(0))
    events.append(MESSAGE_STOP)
    final = response(
        *(tool_use(f"tooluse_{index}", "shout", value) for index, value in enumerate(values))
    )
    return events, final


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(split_stream())
def test_streamed_calls_equal_the_calls_of_the_final_response(
    make_host: Callable[..., expediter.Host], case: tuple[list[dict[str, Any]], dict[str, Any]]
) -> None:
    events, final = case
    toolset = make_host(shout, expediter_bedrock).toolset()
    assert summary(toolset.parse_stream("bedrock", events)) == summary(
        toolset.parse_calls("bedrock", final)
    )


def reasoning_delta(index: int, **delta: Any) -> dict[str, Any]:
    return {"contentBlockDelta": {"delta": {"reasoningContent": delta}, "contentBlockIndex": index}}


def test_reasoning_is_kept_in_the_message_with_its_signature(toolset: expediter.Toolset) -> None:
    # With extended thinking, Bedrock refuses the next request unless the assistant message
    # sent back holds the reasoning block (text and signature) before its toolUse.
    events = [
        MESSAGE_START,
        reasoning_delta(0, text="The user wants "),
        reasoning_delta(0, text="a shout."),
        reasoning_delta(0, signature="c2ln"),
        stop(0),
        start(1, "t", "shout"),
        input_delta(1, '{"text": "hi"}'),
        stop(1),
        MESSAGE_STOP,
    ]
    stream = toolset.stream("bedrock").feed_all(events)
    assert stream.text() == "", "reasoning is not the visible text"
    reasoning = {
        "reasoningContent": {
            "reasoningText": {"text": "The user wants a shout.", "signature": "c2ln"}
        }
    }
    assert stream.message()["content"] == [reasoning, tool_use("t", "shout", {"text": "hi"})]
    assert stream.response()["output"]["message"]["content"][0] == reasoning
    assert summary(stream.calls()) == [("t", "shout", "shout", {"text": "hi"}, None)]


def test_redacted_reasoning_is_sent_back_as_it_came(toolset: expediter.Toolset) -> None:
    events = [reasoning_delta(0, redactedContent=b"\x00opaque"), stop(0), MESSAGE_STOP]
    stream = toolset.stream("bedrock").feed_all(events)
    assert stream.message()["content"] == [{"reasoningContent": {"redactedContent": b"\x00opaque"}}]
