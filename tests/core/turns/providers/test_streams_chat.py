"""Chat Completions streams (OpenAI, Mistral, every OpenAI-compatible server): the router
that repeats a call's whole name in every delta, true name fragments, argument bytes split at
every byte offset, index-less calls, other choices, and hostile chunks that never raise."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from support.streams import ALTERNATE, chat_chunk, chat_chunks, chat_final

from expediter.core.turns.toolset import Toolset

THOUGHT = {"thought": "Tokyo is ahead; ünïcödé 😀 end"}


def fragment(**fields: Any) -> dict[str, Any]:
    return chat_chunk({"tool_calls": [fields]})


# -- the repeated-name defect -------------------------------------------------------------------


def test_a_router_repeating_the_whole_name_in_every_delta_gives_the_name_once(
    toolset: Toolset,
) -> None:
    calls = [
        ("call_A1", "now", '{"timezone": "Asia/Tokyo"}'),
        ("call_B2", "think", json.dumps(THOUGHT)),
    ]
    chunks = chat_chunks(calls, cuts=[range(0, 60, 3)] * 2, picks=ALTERNATE, repeat_name=True)
    assert sum('"name": "think"' in json.dumps(chunk) for chunk in chunks) > 5
    made = toolset.parse_stream("openai", chunks)
    assert [(c.name, c.action, c.error) for c in made] == [
        ("now", "now", None),
        ("think", "think", None),
    ]
    assert made == toolset.parse_calls("openai", chat_final(calls))


def test_a_repeated_name_before_the_arguments_with_the_same_id_is_the_same_name(
    toolset: Toolset,
) -> None:
    chunks = [
        fragment(index=0, id="c1", type="function", function={"name": "think"}),
        fragment(index=0, id="c1", type="function", function={"name": "think"}),
        fragment(index=0, id="c1", function={"name": "think", "arguments": json.dumps(THOUGHT)}),
        chat_chunk({}, "tool_calls"),
    ]
    (call,) = toolset.parse_stream("openai", chunks)
    assert (call.name, call.arguments, call.error) == ("think", THOUGHT, None)


def test_a_repeated_name_without_the_id_that_carries_arguments_is_the_same_name(
    toolset: Toolset,
) -> None:
    # A router repeating the name, but not the id, with the first delta's arguments empty.
    chunks = [
        fragment(index=0, id="c1", type="function", function={"name": "think", "arguments": ""}),
        fragment(index=0, id="", function={"name": "think", "arguments": '{"text": '}),
        fragment(index=0, function={"name": "think", "arguments": '"hm"}'}),
        chat_chunk({}, "tool_calls"),
    ]
    (call,) = toolset.parse_stream("openai", chunks)
    assert (call.call_id, call.name, call.arguments, call.error) == (
        "c1",
        "think",
        {"text": "hm"},
        None,
    )


def test_true_name_fragments_are_still_joined(toolset: Toolset) -> None:
    chunks = [
        fragment(index=0, id="c1", type="function", function={"name": "th", "arguments": ""}),
        fragment(index=0, function={"name": "ink"}),
        fragment(index=0, function={"arguments": json.dumps(THOUGHT)}),
        # A name that happens to repeat its first piece, streamed in fragments.
        fragment(index=1, id="c2", type="function", function={"name": "no"}),
        fragment(index=1, function={"name": "no"}),
        fragment(index=1, function={"arguments": "{}"}),
        chat_chunk({}, "tool_calls"),
    ]
    think, nono = toolset.parse_stream("openai", chunks)
    assert (think.name, think.action, think.error) == ("think", "think", None)
    assert nono.name == "nono"
    assert "unknown function name" in (nono.error or "")


# -- split anywhere --------------------------------------------------------------------------------


def test_argument_bytes_split_at_every_byte_offset_of_a_multibyte_character(
    toolset: Toolset,
) -> None:
    text = json.dumps(THOUGHT, ensure_ascii=False)
    data = text.encode("utf-8")
    start = data.index("😀".encode())
    for offset in range(start - 2, start + 6):
        chunks = [
            fragment(index=0, id="c1", type="function", function={"name": "think"}),
            fragment(index=0, function={"arguments": data[:offset]}),
            fragment(index=0, function={"arguments": data[offset:]}),
            chat_chunk({}, "tool_calls"),
        ]
        (call,) = toolset.parse_stream("openai", chunks)
        assert (call.action, call.arguments, call.error) == ("think", THOUGHT, None), offset


def test_argument_bytes_that_are_not_utf8_are_an_error(toolset: Toolset) -> None:
    chunks = [
        fragment(index=0, id="c1", type="function", function={"name": "think"}),
        fragment(index=0, function={"arguments": b'{"thought": "\xff"}'}),
        chat_chunk({}, "tool_calls"),
    ]
    (call,) = toolset.parse_stream("openai", chunks)
    assert "not valid UTF-8" in (call.error or "")


def test_a_lone_surrogate_stays_lone_and_the_call_still_reads(toolset: Toolset) -> None:
    chunks = [
        fragment(index=0, id="c1", type="function", function={"name": "think"}),
        fragment(index=0, function={"arguments": '{"thought": "a\ud83d'}),
        fragment(index=0, function={"arguments": 'b"}'}),
        chat_chunk({}, "tool_calls"),
    ]
    (call,) = toolset.parse_stream("openai", chunks)
    whole = toolset.parse_calls("openai", chat_final([("c1", "think", '{"thought": "a\ud83db"}')]))
    assert call == whole[0]


# -- index-less calls and other choices -----------------------------------------------------------


def test_index_less_fragments_keep_calls_apart_by_id(toolset: Toolset) -> None:
    chunks = [
        fragment(id="a", function={"name": "now", "arguments": '{"timezone": '}),
        fragment(id="b", function={"name": "think", "arguments": '{"thought": '}),
        fragment(id="a", function={"arguments": '"UTC"}'}),
        fragment(id="b", function={"arguments": '"x"}'}),
        chat_chunk({}, "tool_calls"),
    ]
    now, think = toolset.parse_stream("mistral", chunks)
    assert (now.call_id, now.arguments, now.error) == ("a", {"timezone": "UTC"}, None)
    assert (think.call_id, think.arguments, think.error) == ("b", {"thought": "x"}, None)


def test_mistral_calls_at_index_zero_with_object_arguments(toolset: Toolset) -> None:
    chunks = [
        fragment(index=0, id="a", function={"name": "now", "arguments": {"timezone": "UTC"}}),
        fragment(index=0, id="b", function={"name": "think", "arguments": THOUGHT}),
    ]  # no finish_reason: whole objects are complete
    stream = toolset.stream("mistral").feed_all(chunks)
    assert [(c.call_id, c.arguments, c.error) for c in stream.calls()] == [
        ("a", {"timezone": "UTC"}, None),
        ("b", THOUGHT, None),
    ]
    assert not stream.finished()


def test_only_the_first_choice_is_followed(toolset: Toolset) -> None:
    other = chat_chunk(
        {"content": "other", "tool_calls": [{"index": 0, "id": "z", "function": {"name": "x"}}]}
    )
    other["choices"][0]["index"] = 1
    chunks = chat_chunks([("c1", "now", "{}")])
    chunks.insert(2, other)
    stream = toolset.stream("openai").feed_all(chunks)
    assert [c.call_id for c in stream.calls()] == ["c1"]
    assert "other" not in stream.text()


def test_the_message_carries_a_made_up_id_for_a_call_sent_without_one(toolset: Toolset) -> None:
    chunks = [
        fragment(index=0, function={"name": "now", "arguments": "{}"}),
        chat_chunk({}, "stop"),
    ]
    stream = toolset.stream("openai").feed_all(chunks)
    (call,) = stream.calls()
    message = stream.message()
    assert message["tool_calls"][0]["id"] == call.call_id
    assert len(call.call_id) == 9


# -- hostile chunks --------------------------------------------------------------------------------


def deep(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": [value]}
    return value


HOSTILE: list[Any] = [
    None,
    7,
    "data: [DONE]",
    b"bytes",
    ["choices"],
    math.nan,
    {"choices": None},
    {"choices": [None, 3, "x"]},
    {"choices": [{"delta": {"tool_calls": "now"}}]},
    {"choices": [{"delta": {"tool_calls": [None, 1, {"index": 10**100, "function": 5}]}}]},
    {
        "choices": [
            {
                "delta": {
                    "tool_calls": [{"index": 2**62, "id": ["x"], "function": {"name": math.nan}}]
                }
            }
        ]
    },
    {"choices": [{"delta": {"content": math.inf, "refusal": 3}}]},
    {
        "choices": [
            {
                "index": True,
                "delta": {"tool_calls": [{"index": -5, "function": {"arguments": math.nan}}]},
            }
        ]
    },
    {"choices": [{"delta": deep(5_000)}]},
    deep(10_000),
    {"data": {"data": {"choices": []}}},
    {
        "choices": [
            {
                "delta": {
                    "tool_calls": [
                        {"index": 0, "id": "", "function": {"name": "", "arguments": None}}
                    ]
                }
            }
        ]
    },
]


@pytest.mark.parametrize("provider", ["openai", "mistral"])
def test_hostile_chunks_never_raise_and_calls_say_what_was_wrong(
    toolset: Toolset, provider: str
) -> None:
    stream = toolset.stream(provider)
    for chunk in HOSTILE:
        stream.feed(chunk)
    for call in stream.calls():
        assert call.error is not None
        assert len(call.error) < 1_000
    json.dumps(stream.response(), default=repr)
    stream.message()
    stream.text()
