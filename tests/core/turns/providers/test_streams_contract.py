"""Every provider's stream, through one interface: two interleaved parallel calls, arguments
split at every offset of multi-byte characters, a stream cut short, an empty-argument call,
SDK objects fed as they are, and (a property) the same calls as the complete response's parse
for any split of the calls' arguments."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.streams import (
    ALTERNATE,
    Call,
    anthropic_events,
    anthropic_final,
    chat_chunks,
    chat_final,
    gemini_chunks,
    gemini_final,
    ollama_chunks,
    ollama_final,
    responses_events,
    responses_final,
)

from expediter.core.turns.toolset import Toolset

Stream = Callable[..., list[dict[str, Any]]]
Final = Callable[[Sequence[Call]], dict[str, Any]]

#: Providers whose calls' arguments stream as text, and how their stream and final look.
TEXT_STREAMS: dict[str, tuple[Stream, Final]] = {
    "openai": (chat_chunks, chat_final),
    "mistral": (lambda calls, *a, **k: chat_chunks(calls, *a, index=False, **k), chat_final),
    "openai-responses": (responses_events, responses_final),
    "anthropic": (anthropic_events, anthropic_final),
}
#: Providers that send each call whole (arguments an object).
WHOLE_STREAMS: dict[str, tuple[Stream, Final]] = {
    "gemini": (gemini_chunks, gemini_final),
    "ollama": (ollama_chunks, ollama_final),
}
PROVIDERS = sorted([*TEXT_STREAMS, *WHOLE_STREAMS])

ARGS = {
    "now": {"timezone": "Asia/Tokyo"},
    "think": {"thought": 'Tokyo is ahead; ünïcödé 😀 "quoted" \\ end'},
}


def two_calls(provider: str) -> list[Call]:
    """Two parallel calls of this provider's kind (ids "" for Gemini: it sends none)."""
    calls = [("call_A1", "now", ARGS["now"]), ("call_B2", "think", ARGS["think"])]
    if provider in TEXT_STREAMS:
        return [(i, n, json.dumps(a, ensure_ascii=False)) for i, n, a in calls]
    return [("" if provider == "gemini" else i, n, a) for i, n, a in calls]


def streamed(provider: str, calls: Sequence[Call], **options: Any) -> list[dict[str, Any]]:
    stream = {**TEXT_STREAMS, **WHOLE_STREAMS}[provider][0]
    return stream(calls, **options)


def final(provider: str, calls: Sequence[Call]) -> dict[str, Any]:
    return {**TEXT_STREAMS, **WHOLE_STREAMS}[provider][1](calls)


# -- two interleaved parallel calls ----------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_interleaved_parallel_calls_are_the_complete_responses_calls(
    toolset: Toolset, provider: str
) -> None:
    calls = two_calls(provider)
    if provider in TEXT_STREAMS:
        chunks = streamed(provider, calls, cuts=[range(0, 99, 3)] * 2, picks=ALTERNATE)
        # The two calls' fragments really do alternate.
        assert len(chunks) > 30
    else:
        chunks = streamed(provider, calls, together=True)
    stream = toolset.stream(provider)
    for chunk in chunks:
        stream.feed(chunk)
    made = stream.calls()
    assert made == toolset.parse_calls(provider, final(provider, calls))
    assert [(c.action, c.arguments, c.error) for c in made] == [
        ("now", ARGS["now"], None),
        ("think", ARGS["think"], None),
    ]
    assert stream.finished()
    assert stream.text() == "Checking the clocks - ünïcödé 😀 first."
    assert toolset.parse_stream(provider, chunks) == made


@pytest.mark.parametrize("provider", sorted(WHOLE_STREAMS))
def test_whole_calls_in_separate_early_chunks_are_kept_when_the_last_chunk_has_none(
    toolset: Toolset, provider: str
) -> None:
    calls = two_calls(provider)
    chunks = streamed(provider, calls)
    last = json.dumps(chunks[-1])
    assert "tool_calls" not in last
    assert "functionCall" not in last
    made = toolset.parse_stream(provider, chunks)
    assert made == toolset.parse_calls(provider, final(provider, calls))
    assert [c.action for c in made] == ["now", "think"]


# -- split anywhere --------------------------------------------------------------------------------


def _offsets_around_multibyte(text: str) -> list[int]:
    """Every offset inside or next to a non-ASCII character or a backslash escape."""
    marks = [i for i, ch in enumerate(text) if ord(ch) > 127 or ch == "\\"]
    return sorted({o for i in marks for o in range(max(1, i - 1), min(len(text), i + 7))})


@pytest.mark.parametrize("provider", sorted(TEXT_STREAMS))
def test_arguments_split_at_every_offset_of_multibyte_characters_and_escapes(
    toolset: Toolset, provider: str
) -> None:
    # ensure_ascii: the text carries \\uXXXX escapes (a surrogate pair for the emoji) to cut.
    for ascii_only in (False, True):
        calls = [
            ("call_A1", "now", json.dumps(ARGS["now"])),
            ("call_B2", "think", json.dumps(ARGS["think"], ensure_ascii=ascii_only)),
        ]
        expected = toolset.parse_calls(provider, final(provider, calls))
        assert expected[1].arguments == ARGS["think"]
        for offset in _offsets_around_multibyte(calls[1][2]):
            chunks = streamed(provider, calls, cuts=[[5], [offset]], picks=ALTERNATE)
            assert toolset.parse_stream(provider, chunks) == expected, offset


@pytest.mark.parametrize("provider", sorted(TEXT_STREAMS))
def test_surrogate_halves_in_separate_chunks_join_into_their_character(
    toolset: Toolset, provider: str
) -> None:
    # A server slicing UTF-16 text writes each half as its own \\udXXX escape: the chunks'
    # JSON decodes to two lone surrogates, one per chunk.
    text = json.dumps(ARGS["think"], ensure_ascii=False)
    where = text.index("😀")
    halves = text[:where] + "\ud83d" + "\ude00" + text[where + 1 :]
    calls = [("call_B2", "think", halves)]
    chunks = streamed(provider, calls, cuts=[[where + 1]])
    wire = [json.loads(json.dumps(chunk)) for chunk in chunks]  # as a JSON parser gives them
    (call,) = toolset.parse_stream(provider, wire)
    assert (call.action, call.arguments, call.error) == ("think", ARGS["think"], None)


@pytest.mark.parametrize("provider", sorted(WHOLE_STREAMS))
def test_text_split_at_every_offset_of_multibyte_characters_adds_up(
    toolset: Toolset, provider: str
) -> None:
    calls = two_calls(provider)
    expected = toolset.parse_calls(provider, final(provider, calls))
    text = "ünïcödé 😀 and \ud83d\ude00 again"
    for offset in range(1, len(text)):
        if provider == "gemini":
            chunks = gemini_chunks(calls, cuts=[offset], text=text)
            # The final text part holds the whole text: the ids made from the parts agree.
            expected = toolset.parse_calls(provider, gemini_final(calls, text=text))
        else:
            chunks = ollama_chunks(calls, text=text)
        stream = toolset.stream(provider).feed_all(chunks)
        assert stream.calls() == expected
        assert stream.text() == text


# -- a stream cut short --------------------------------------------------------------------------


@pytest.mark.parametrize("provider", sorted(TEXT_STREAMS))
def test_a_truncated_stream_gives_the_complete_calls_and_an_error_for_the_partial_one(
    toolset: Toolset, provider: str
) -> None:
    calls = two_calls(provider)
    chunks = streamed(provider, calls, cuts=[range(0, 99, 4), [20, 40]], finish=False)
    # Cut inside the second call's arguments (the calls come one after the other).
    middle = json.dumps(calls[1][2][20:40])[1:-1]
    last = next(i for i, chunk in enumerate(chunks) if middle in json.dumps(chunk))
    for end in (last, last + 1):
        stream = toolset.stream(provider).feed_all(chunks[:end])
        first, second = stream.calls()
        assert (first.action, first.arguments, first.error) == ("now", ARGS["now"], None)
        assert second.action == "think"
        assert second.arguments == {}
        assert second.error is not None
        assert "the stream ended before this call was complete" in second.error
        assert not stream.finished()


@pytest.mark.parametrize("provider", sorted(TEXT_STREAMS))
def test_a_call_cut_before_any_argument_arrived_is_an_error_not_empty_arguments(
    toolset: Toolset, provider: str
) -> None:
    calls = two_calls(provider)
    chunks = streamed(provider, calls, finish=False)
    opened = next(i for i, chunk in enumerate(chunks) if '"think"' in json.dumps(chunk))
    *_, second = toolset.parse_stream(provider, chunks[: opened + 1])
    assert second.action == "think"
    assert "the stream ended before this call was complete" in (second.error or "")


@pytest.mark.parametrize("provider", sorted(WHOLE_STREAMS))
def test_a_truncated_whole_call_stream_keeps_the_calls_that_arrived(
    toolset: Toolset, provider: str
) -> None:
    calls = two_calls(provider)
    chunks = streamed(provider, calls, finish=False)
    stream = toolset.stream(provider).feed_all(chunks[:-3])
    assert [(c.action, c.error) for c in stream.calls()] == [("now", None), ("think", None)]
    assert not stream.finished()


# -- empty arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_empty_argument_call_has_empty_arguments(toolset: Toolset, provider: str) -> None:
    empty: Any = "" if provider in TEXT_STREAMS else {}
    calls = [("call_E1", "now", empty), *two_calls(provider)[1:]]
    if provider == "gemini":
        calls[0] = ("", "now", empty)
    made = toolset.parse_stream(provider, streamed(provider, calls))
    assert [(c.action, c.arguments, c.error) for c in made] == [
        ("now", {}, None),
        ("think", ARGS["think"], None),
    ]
    assert made == toolset.parse_calls(provider, final(provider, calls))


@pytest.mark.parametrize("provider", ["openai", "mistral"])
def test_empty_and_null_argument_deltas_are_skipped(toolset: Toolset, provider: str) -> None:
    chunks = chat_chunks(two_calls(provider)[:1], cuts=[[4]], picks=())
    extra = []
    for chunk in chunks:
        extra.append(chunk)
        for fragment in chunk["choices"][0]["delta"].get("tool_calls", []):
            for nothing in ("", None):
                copy = json.loads(json.dumps(chunk))
                copy["choices"][0]["delta"]["tool_calls"][0]["function"] = {"arguments": nothing}
                copy["choices"][0]["delta"]["tool_calls"][0].pop("id", None)
                if "index" in fragment:
                    extra.append(copy)
    (call,) = toolset.parse_stream(provider, extra)
    assert (call.action, call.arguments, call.error) == ("now", ARGS["now"], None)


# -- the property ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
call_args = st.dictionaries(
    st.sampled_from(["thought", "timezone", "x", "é😀"]), json_values, max_size=3
)
names = st.sampled_from(["now", "think", "convert", "nope", ""])


@st.composite
def text_calls(draw: st.DrawFn) -> list[Call]:
    """Calls whose argument text is JSON (written either way), or now and then not."""
    made = []
    for number in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 5)) == 0:
            text = draw(st.sampled_from(["", "{", "[1]", '{"a": 1}{"b": 2}', "not json", "NaN"]))
        else:
            text = json.dumps(draw(call_args), ensure_ascii=draw(st.booleans()))
        made.append((f"call_{number}", draw(names), text))
    return made


PROPERTY = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("provider", sorted(TEXT_STREAMS))
@PROPERTY
@given(calls=text_calls(), data=st.data())
def test_any_split_of_streamed_arguments_parses_as_the_complete_response(
    toolset: Toolset, provider: str, calls: list[Call], data: st.DataObject
) -> None:
    cuts = [data.draw(st.lists(st.integers(0, 60), max_size=8)) for _ in calls]
    picks = data.draw(st.lists(st.integers(0, 5), max_size=60))
    chunks = streamed(provider, calls, cuts=cuts, picks=picks)
    streamed_calls = toolset.parse_stream(provider, chunks)
    expected = toolset.parse_calls(provider, final(provider, calls))
    assert [(c.call_id, c.name, c.arguments, c.error) for c in streamed_calls] == [
        (c.call_id, c.name, c.arguments, c.error) for c in expected
    ]
    assert streamed_calls == expected


@pytest.mark.parametrize("provider", sorted(WHOLE_STREAMS))
@PROPERTY
@given(data=st.data())
def test_any_split_of_a_whole_call_stream_parses_as_the_complete_response(
    toolset: Toolset, provider: str, data: st.DataObject
) -> None:
    count = data.draw(st.integers(0, 3))
    calls: list[Call] = [
        (data.draw(st.sampled_from(["", f"id_{n}"])), data.draw(names), data.draw(call_args))
        for n in range(count)
    ]
    text = data.draw(st.text(max_size=20))
    together = data.draw(st.booleans())
    if provider == "gemini":
        cuts = data.draw(st.lists(st.integers(0, 40), max_size=6))
        chunks = gemini_chunks(calls, cuts=cuts, together=together, text=text)
        expected = toolset.parse_calls(provider, gemini_final(calls, text=text))
    else:
        chunks = ollama_chunks(calls, together=together, text=text)
        expected = toolset.parse_calls(provider, ollama_final(calls, text=text))
    assert toolset.parse_stream(provider, chunks) == expected


# -- SDK objects, fed as the SDK yields them -------------------------------------------------------


def _sdk_objects(provider: str, chunks: list[dict[str, Any]]) -> list[Any]:
    import pydantic

    if provider == "openai":
        from openai.types.chat import ChatCompletionChunk

        return [ChatCompletionChunk.model_validate(chunk) for chunk in chunks]
    if provider == "openai-responses":
        from openai.types.responses import ResponseStreamEvent

        adapter: Any = pydantic.TypeAdapter(ResponseStreamEvent)
        return [adapter.validate_python(event) for event in chunks]
    if provider == "anthropic":
        from anthropic.types import RawMessageStreamEvent

        adapter = pydantic.TypeAdapter(RawMessageStreamEvent)
        return [adapter.validate_python(event) for event in chunks]
    if provider == "gemini":
        from google.genai.types import GenerateContentResponse

        return [GenerateContentResponse.model_validate(chunk) for chunk in chunks]
    if provider == "ollama":
        from ollama import ChatResponse

        return [ChatResponse.model_validate(chunk) for chunk in chunks]
    from mistralai.client.models import CompletionEvent

    return [CompletionEvent.model_validate({"data": chunk}) for chunk in chunks]


def _mistral_whole_chunks(calls: Sequence[Call]) -> list[dict[str, Any]]:
    """Mistral's way: each call whole (name and arguments) in one delta, with no index."""
    chunks = chat_chunks([], picks=())
    for call_id, name, arguments in calls:
        whole = {"id": call_id, "function": {"name": name, "arguments": arguments}}
        chunks.append(
            {
                **chunks[-1],
                "choices": [{"index": 0, "delta": {"tool_calls": [whole]}, "finish_reason": None}],
            }
        )
    chunks.append(
        {
            **chunks[-1],
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "tool_calls"}],
        }
    )
    return chunks


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sdk_objects_add_up_to_the_same_calls_as_their_json(
    toolset: Toolset, provider: str
) -> None:
    calls = two_calls(provider)
    if provider == "mistral":
        chunks = _mistral_whole_chunks(calls)
    elif provider in TEXT_STREAMS:
        chunks = streamed(provider, calls, cuts=[range(0, 99, 5)] * 2, picks=ALTERNATE)
    else:
        chunks = streamed(provider, calls)
    objects = _sdk_objects(provider, chunks)
    from_objects = toolset.stream(provider).feed_all(objects)
    from_json = toolset.stream(provider).feed_all(chunks)
    got = from_objects.calls()
    assert [(c.action, c.arguments, c.error) for c in got] == [
        ("now", ARGS["now"], None),
        ("think", ARGS["think"], None),
    ]
    if provider in WHOLE_STREAMS:
        # The SDK drops fields it does not know (Ollama's index) and reads Gemini's base64
        # signatures into bytes: the made-up ids are those of the SDK's complete response.
        whole = _sdk_objects(provider, [final(provider, calls)])[0]
        dumped = whole.model_dump(by_alias=True, exclude_none=True)
        assert got == toolset.parse_calls(provider, dumped)
    else:
        assert got == from_json.calls()
    assert from_objects.text() == from_json.text()
    assert from_objects.finished()


def test_gemini_sdk_objects_keep_signatures_and_ids_of_the_sdk_response(toolset: Toolset) -> None:
    from google.genai.types import GenerateContentResponse

    calls = two_calls("gemini")
    objects = [GenerateContentResponse.model_validate(c) for c in gemini_chunks(calls)]
    whole = GenerateContentResponse.model_validate(gemini_final(calls))
    expected = toolset.parse_calls("gemini", whole.model_dump(by_alias=True, exclude_none=True))
    got = toolset.parse_stream("gemini", objects)
    assert got == expected
    assert (
        got[0].extras["thought_signature"] == whole.candidates[0].content.parts[1].thought_signature
    )


# -- one interface for all six ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_provider_streams_through_the_same_four_lines(
    toolset: Toolset, provider: str
) -> None:
    chunks = streamed(provider, two_calls(provider))
    stream = toolset.stream(provider)
    for chunk in chunks:
        stream.feed(chunk)
    assert [call.action for call in stream.calls()] == ["now", "think"]
    assert isinstance(stream.message(), dict)
    assert toolset.parse_calls(provider, stream.response()) == stream.calls()
