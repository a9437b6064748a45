"""Nothing a model sends escapes parsing: valid responses and streams of every provider, with
fields mutated into hostile shapes (wrong types, deep nesting, huge numbers, NaN, lone
surrogates, huge strings, missing and extra keys, chunks that are not objects), parse into
``ToolCall``s that either carry JSON-object arguments or say what was wrong.

A provider joins by an entry in ``RESPONSES`` (and ``STREAMS`` for its accumulator).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.responses import provider_response

from expediter.core.records.calls import ToolCall
from expediter.core.turns.toolset import Toolset
from expediter.errors import ArgumentError, ExpediterError

Call = tuple[str, str, dict[str, Any]]

#: A valid response making these calls, per provider.
RESPONSES: dict[str, Callable[[list[Call]], dict[str, Any]]] = {
    name: functools.partial(provider_response, name)
    for name in ("openai", "openai-responses", "anthropic", "gemini", "mistral", "ollama")
}


def _delta(delta: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def chat_chunks(calls: list[Call]) -> list[dict[str, Any]]:
    """Chat Completions chunks making these calls, each call's arguments in two fragments."""
    chunks = [_delta({"role": "assistant", "content": "Checking."})]
    for index, (call_id, name, arguments) in enumerate(calls):
        opening = {"index": index, "id": call_id, "type": "function"}
        chunks.append(_delta({"tool_calls": [{**opening, "function": {"name": name}}]}))
        text = json.dumps(arguments)
        for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
            chunks.append(
                _delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    chunks.append(
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "x"}]}
    )
    return chunks


def anthropic_events(calls: list[Call]) -> list[dict[str, Any]]:
    """Messages stream events making these calls after a text block."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "c"}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
    ]
    for index, (call_id, name, arguments) in enumerate(calls, start=1):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        text = json.dumps(arguments)
        for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    return events


#: The chunks of a valid stream making these calls, per provider with a stream accumulator.
STREAMS: dict[str, Callable[[list[Call]], list[dict[str, Any]]]] = {
    "openai": chat_chunks,
    "mistral": chat_chunks,
    "anthropic": anthropic_events,
}

# -- hostile values ----------------------------------------------------------------------------


def deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def deep_dict(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


#: Values that broke parsers: Python reads them, JSON has no such thing or no stack for them.
#: Made anew for each draw, since mutations change containers.
NASTY_VALUES: tuple[Callable[[], Any], ...] = (
    lambda: 10**5000,  # Python refuses to write it out
    lambda: math.nan,
    lambda: math.inf,
    lambda: -math.inf,
    lambda: "\ud800",
    lambda: "x" * 1_000_000,
    lambda: deep_list(70),
    lambda: deep_dict(70),
    lambda: deep_list(10_000),
    lambda: deep_dict(10_000),
)
#: Values of every other kind no field expects.
ODD_VALUES: tuple[Callable[[], Any], ...] = (
    lambda: None,
    lambda: True,
    lambda: False,
    lambda: 0,
    lambda: -1,
    lambda: 2**64,
    lambda: 1.5,
    lambda: "",
    lambda: "now",
    lambda: "\x00\x1b[31mred\r\n",
    lambda: b"bytes",
    lambda: [],
    lambda: {},
    lambda: [None],
    lambda: {"": None},
    lambda: {"name": "now", "arguments": "{}"},
)


@functools.cache
def hostile_texts() -> tuple[str, ...]:
    """Argument texts Python's decoder chokes on or reads as what JSON does not have."""
    return (
        "NaN",
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": -Infinity}',
        '{"a": 1e999}',
        '{"a": ' + "1" * 5000 + "}",
        '{"a": ' + "9" * 4000 + "}",
        "[" * 10_000 + "]" * 10_000,
        '{"a": ' * 10_000 + "1" + "}" * 10_000,
        '{"a": ' + "[" * 70 + "]" * 70 + "}",
        '{"a": 1}{"b": 2}',
        '{"a": "\\ud800", "\\udfff": 1}',
        '{"a"',
        "[]",
        '"x"',
        "   ",
        '{"timezone": "UTC"}',
    )


# Leaves and one level of containers: enough shapes, cheap to draw (the suite's time budget).
clean_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
clean_values = clean_leaves | st.lists(clean_leaves, max_size=2)
hostile = st.one_of(
    st.sampled_from(NASTY_VALUES).map(lambda make: make()),
    st.sampled_from(ODD_VALUES).map(lambda make: make()),
    st.sampled_from(hostile_texts()),
    st.floats() | st.integers() | st.text(max_size=12),
)
names = st.sampled_from(["now", "convert", "think"]) | st.text(max_size=12)
arguments = st.dictionaries(st.text(max_size=6), clean_values, max_size=2)
calls = st.lists(
    st.tuples(st.text(min_size=1, max_size=8), names, arguments), min_size=1, max_size=3
)


# -- mutations ---------------------------------------------------------------------------------


def nodes(tree: Any) -> Iterator[tuple[Any, Any]]:
    """Every ``(container, key)`` in the first levels of a response (or chunk), so a deep
    value put in by an earlier mutation is changed as a whole, not level by level."""
    stack = [(tree, 0)]
    while stack:
        container, depth = stack.pop()
        keys = list(container) if isinstance(container, dict) else range(len(container))
        for key in keys:
            yield container, key
            child = container[key]
            if isinstance(child, dict | list) and len(child) < 50 and depth < 10:
                stack.append((child, depth + 1))


#: Keys parsers read, mutated more often than the rest (ids, model names, usage...).
FIELDS = frozenset(
    {"choices", "message", "tool_calls", "function", "id", "call_id", "name", "arguments"}
    | {"output", "type", "content", "input", "candidates", "parts", "functionCall", "args"}
    | {"thoughtSignature", "delta", "index", "content_block", "partial_json", "text"}
)


def mutate(tree: Any, data: st.DataObject) -> None:
    """Change one place in ``tree``: replace a value (a text by a hostile JSON text), remove
    it, add one beside it, or wrap it."""
    places = list(nodes(tree))
    read = [place for place in places if place[1] in FIELDS]
    if read and data.draw(st.booleans()):
        places = read
    if not places:
        return
    kind = data.draw(st.sampled_from(["replace", "replace", "text", "remove", "extra", "wrap"]))
    texts = [place for place in places if type(place[0][place[1]]) is str]
    if kind == "text" and texts:  # arguments (or any text) Python's decoder chokes on
        container, key = data.draw(st.sampled_from(texts))
        container[key] = data.draw(st.sampled_from(hostile_texts()))
        return
    container, key = data.draw(st.sampled_from(places))
    if kind in ("replace", "text"):
        container[key] = data.draw(hostile)
    elif kind == "remove":
        del container[key]
    elif kind == "extra" and isinstance(container, dict):
        container[data.draw(st.text(max_size=10))] = data.draw(hostile)
    elif kind == "extra":
        container.insert(key, data.draw(hostile))
    else:
        container[key] = data.draw(st.sampled_from([[container[key]], {"a": container[key]}]))


# -- what every parsed call must be ------------------------------------------------------------


def check(toolset: Toolset, provider: str, parsed: list[ToolCall]) -> None:
    assert type(parsed) is list
    for call in parsed:
        assert type(call) is ToolCall
        assert type(call.call_id) is str
        assert call.call_id
        assert type(call.name) is str
        if call.error is None:
            assert type(call.arguments) is dict
            assert call.resolved
            json.dumps(call.arguments, allow_nan=False)  # JSON, shallow enough to write out
        else:
            assert type(call.error) is str
            assert len(call.error) < 1_000  # model values in it are echoed, cut short
    json.dumps([call.to_dict() for call in parsed])
    toolset.result_messages(provider, parsed, [])


FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # the toolset is only read
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
#: For the checks whose inputs vary less.
BRIEF = settings(FUZZ, max_examples=40)


@pytest.mark.parametrize("provider", sorted(RESPONSES))
@FUZZ
@given(made=calls, data=st.data())
def test_a_mutated_response_parses_into_calls_or_argument_errors(
    toolset: Toolset, provider: str, made: list[Call], data: st.DataObject
) -> None:
    response = RESPONSES[provider](made)
    for _ in range(data.draw(st.integers(1, 4))):
        mutate(response, data)
    check(toolset, provider, toolset.parse_calls(provider, response))


@pytest.mark.parametrize("provider", sorted(STREAMS))
@FUZZ
@given(made=calls, data=st.data())
def test_a_mutated_stream_parses_into_calls_or_argument_errors(
    toolset: Toolset, provider: str, made: list[Call], data: st.DataObject
) -> None:
    chunks: list[Any] = STREAMS[provider](made)
    for _ in range(data.draw(st.integers(1, 4))):
        inside = [chunk for chunk in chunks if isinstance(chunk, dict | list)]
        if not inside or data.draw(st.booleans()):
            mutate(chunks, data)  # a chunk itself replaced, removed, or one added
        else:
            mutate(data.draw(st.sampled_from(inside)), data)
    accumulator = toolset.stream(provider)
    for chunk in chunks:
        accumulator.feed(chunk)
    check(toolset, provider, toolset.parse_calls(provider, accumulator.response()))
    check(toolset, provider, toolset.parse_stream(provider, chunks))


@pytest.mark.parametrize("provider", sorted(RESPONSES))
@BRIEF
@given(value=hostile)
def test_a_response_that_is_not_an_object_is_an_argument_error(
    toolset: Toolset, provider: str, value: Any
) -> None:
    if isinstance(value, dict):
        check(toolset, provider, toolset.parse_calls(provider, value))
        return
    with pytest.raises(ArgumentError, match="must be a JSON object"):
        toolset.parse_calls(provider, value)


@pytest.mark.parametrize("provider", sorted(RESPONSES))
@BRIEF
@given(made=calls)
def test_unmutated_responses_and_streams_parse_cleanly(
    toolset: Toolset, provider: str, made: list[Call]
) -> None:
    parsed = toolset.parse_calls(provider, RESPONSES[provider](made))
    check(toolset, provider, parsed)
    assert len(parsed) == len(made)
    for call, (_, name, sent) in zip(parsed, made, strict=True):
        if call.error is None:
            assert (call.name, call.arguments) == (name, sent)
    if provider in STREAMS:
        assert toolset.parse_stream(provider, STREAMS[provider](made)) == parsed


@pytest.mark.parametrize("value", [None, 3, ["openai"], {"a": 1}, "cohere"])
def test_a_provider_name_that_is_not_one_is_unknown_provider(toolset: Toolset, value: Any) -> None:
    with pytest.raises(ExpediterError, match="unknown provider"):
        toolset.parse_calls(value, {})
