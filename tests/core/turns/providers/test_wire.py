"""The wire reader: captured streams (server-sent events, NDJSON, a JSON array of chunks) read
back into their chunks whatever the size of the pieces the bytes come in, and what is not a
stream refused with the line it fails at."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expediter.core.turns.providers import wire
from expediter.core.turns.providers.wire import READ_SIZE, WireError, WireReader, read_wire
from expediter.errors import ArgumentError

#: Chunks carrying multi-byte characters of every UTF-8 length (2, 3 and 4 bytes), raw and (the
#: chunk marked ``ascii``) as ``\\u`` escapes, a surrogate pair among them.
CHUNKS: list[dict[str, Any]] = [
    {"type": "message_start", "text": "café"},
    {"type": "content_block_delta", "delta": "日本語 and 😀"},
    {"type": "content_block_delta", "delta": "😀 é escaped", "n": [1, 2.5, None], "ascii": True},
    {"type": "message_stop"},
]


def dumps(chunk: dict[str, Any], indent: int | None = None) -> str:
    return json.dumps(chunk, ensure_ascii="ascii" in chunk, indent=indent)


def sse(chunks: Iterable[dict[str, Any]], end: str = "\n", done: bool = True) -> bytes:
    lines = []
    for chunk in chunks:
        lines += [f"event: {chunk['type']}", f"data: {dumps(chunk)}", ""]
    if done:
        lines += ["data: [DONE]", ""]
    return (end.join(lines) + end).encode()


def ndjson(chunks: Iterable[dict[str, Any]], end: str = "\n") -> bytes:
    return "".join(dumps(c) + end for c in chunks).encode()


def array(chunks: Iterable[dict[str, Any]], end: str = "\n") -> bytes:
    body = f",{end}".join(dumps(c, indent=2) for c in chunks)
    return f"[{body}]{end}".replace("\n", end).encode()


FRAMINGS = {"sse": sse, "ndjson": ndjson, "json": array}


def read(pieces: Iterable[bytes | str]) -> tuple[list[dict[str, Any]], WireReader]:
    reader = WireReader()
    chunks: list[dict[str, Any]] = []
    for piece in pieces:
        chunks += reader.feed(piece)
    chunks += reader.close()
    return chunks, reader


def read_bytes(data: bytes) -> list[dict[str, Any]]:
    return read([data])[0]


def error(data: bytes, pieces: int = 1) -> WireError:
    size = max(1, len(data) // pieces)
    with pytest.raises(WireError) as caught:
        read([data[i : i + size] for i in range(0, len(data), size)])
    return caught.value


# -- the three framings ------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_each_framing_reads_back_its_chunks_with_any_line_end(framing: str, end: str) -> None:
    chunks, reader = read([FRAMINGS[framing](CHUNKS, end)])
    assert chunks == CHUNKS
    assert reader.framing == framing
    assert reader.notes == []


def test_sse_comments_ids_retries_and_unknown_fields_are_skipped() -> None:
    data = (
        b': keep-alive\n\nretry: 3000\nid: 7\nevent: ping\nfoo: bar\ndata: {"a": 1}\n\n'
        b':another comment\ndata:{"b": 2}\n\n'
    )
    assert read_bytes(data) == [{"a": 1}, {"b": 2}]


def test_sse_data_lines_of_one_event_are_joined_with_a_newline() -> None:
    data = b'data: {"a":\ndata:   [1,\ndata: 2]}\n\ndata: {"b": "x"}\n\n'
    assert read_bytes(data) == [{"a": [1, 2]}, {"b": "x"}]


def test_sse_done_ends_the_stream_and_what_follows_is_only_noted() -> None:
    data = b'data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"b": 2}\n\n\xff\xfe binary\n'
    chunks, reader = read([data])
    assert chunks == [{"a": 1}]
    assert reader.done
    assert reader.notes == ["line 5: what follows the end of the stream is ignored"]
    # Fed in pieces, the text after the end is never decoded either.
    chunks, reader = read([data[:30], data[30:45], data[45:]])
    assert chunks == [{"a": 1}]
    assert len(reader.notes) == 1


def test_an_event_with_empty_data_is_no_chunk() -> None:
    assert read_bytes(b'data:\n\ndata: {"a": 1}\n\n') == [{"a": 1}]


def test_a_byte_order_mark_and_leading_blank_lines_are_skipped() -> None:
    assert read_bytes(b'\xef\xbb\xbf\n\n{"a": 1}\n') == [{"a": 1}]
    assert read_bytes(b'\xef\xbb\xbf\r\n  [{"a": 1}]') == [{"a": 1}]
    assert read_bytes(b'\xef\xbb\xbfdata: {"a": 1}\n\n') == [{"a": 1}]


def test_ndjson_skips_blank_lines_and_reads_a_last_line_without_a_line_end() -> None:
    assert read_bytes(b'{"a": 1}\n\n  \n{"b": 2}') == [{"a": 1}, {"b": 2}]


def test_a_last_sse_event_without_its_blank_line_is_still_read() -> None:
    chunks, reader = read([b'data: {"a": 1}\n\ndata: {"b": 2}'])
    assert chunks == [{"a": 1}, {"b": 2}]
    assert not reader.done
    assert reader.notes == []


@pytest.mark.parametrize("data", [b"[]", b"[\n]\n", b"  [ ]  "])
def test_an_empty_json_array_is_an_ended_stream_without_chunks(data: bytes) -> None:
    chunks, reader = read([data])
    assert (chunks, reader.done, reader.notes) == ([], True, [])


def test_a_compact_json_array_on_one_line() -> None:
    data = json.dumps(CHUNKS, separators=(",", ":")).encode()
    assert read_bytes(data) == CHUNKS


def test_text_pieces_read_as_bytes_do() -> None:
    data = sse(CHUNKS).decode()
    assert read([data[:17], data[17:40], data[40:]])[0] == CHUNKS


def test_read_wire_yields_chunks_as_they_complete() -> None:
    pieces = iter([b'data: {"a": 1}\n', b"\n", b'data: {"b": 2}\n\n'])
    chunks = read_wire(pieces)
    assert next(chunks) == {"a": 1}
    assert next(chunks) == {"b": 2}
    assert list(chunks) == []


# -- any split of the bytes --------------------------------------------------------------------


def multibyte_offsets(data: bytes) -> list[int]:
    """Every offset that falls inside a multi-byte UTF-8 character."""
    return [i for i in range(1, len(data)) if data[i] & 0xC0 == 0x80]


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_split_at_every_byte_offset_reads_the_same(framing: str, end: str) -> None:
    data = FRAMINGS[framing](CHUNKS, end)
    inside = multibyte_offsets(data)
    assert len(inside) >= 10  # 2-, 3- and 4-byte characters are split in every place
    for offset in range(len(data) + 1):
        chunks, reader = read([data[:offset], data[offset:]])
        assert chunks == CHUNKS, offset
        assert reader.notes == [], offset


@pytest.mark.parametrize("framing", FRAMINGS)
def test_one_byte_at_a_time_reads_the_same(framing: str) -> None:
    data = FRAMINGS[framing](CHUNKS, "\r\n")
    chunks, reader = read(data[i : i + 1] for i in range(len(data)))
    assert chunks == CHUNKS
    assert reader.notes == []


@settings(max_examples=150, deadline=None)
@given(
    framing=st.sampled_from(sorted(FRAMINGS)),
    end=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_split_into_pieces_reads_the_same(framing: str, end: str, cuts: list[int]) -> None:
    data = FRAMINGS[framing](CHUNKS, end)
    offsets = sorted({cut % (len(data) + 1) for cut in cuts})
    bounds = [0, *offsets, len(data)]
    pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert read(pieces)[0] == CHUNKS


def test_a_crlf_split_between_pieces_is_one_line_end() -> None:
    data = b'data: {"a": 1}\r\n\r\ndata: {"b": \r\n\r\n'
    for offset in range(len(data) + 1):
        caught = error(data[:offset] + data[offset:], pieces=1)
        assert caught.line == 3
        with pytest.raises(WireError) as split:
            read([data[:offset], data[offset:]])
        assert split.value.line == 3, offset


def test_a_chunk_of_many_lines_is_decoded_a_logarithmic_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pretty-printed, each chunk spans ~20,000 lines and several reads: trying to decode it
    # at every line would take quadratic time.
    big = {"candidates": [{"text": f"é {i}", "index": i} for i in range(4000)]}
    data = array([big, big])
    assert len(data) > 4 * READ_SIZE
    tries = []
    decode = wire._raw_decode

    def counted(text: str, pos: int) -> Any:
        tries.append(len(text))
        assert len(tries) < 80, "decoded too often"
        return decode(text, pos)

    monkeypatch.setattr(wire, "_raw_decode", counted)
    pieces = [data[i : i + READ_SIZE] for i in range(0, len(data), READ_SIZE)]
    assert read(pieces)[0] == [big, big]
    pieces = [data[i : i + 1000] for i in range(0, len(data), 1000)]
    tries.clear()
    assert read(pieces)[0] == [big, big]


# -- what is not a stream ------------------------------------------------------------------------


def test_wire_errors_are_argument_errors_with_the_line() -> None:
    caught = error(b'{"a": 1}\n{"a": x}\n')
    assert isinstance(caught, ArgumentError)
    assert caught.line == 2
    assert str(caught) == "line 2: the data is not JSON (Expecting value, column 7)"


@pytest.mark.parametrize("pieces", [1, 3, 50])
def test_invalid_utf8_names_its_line_and_byte(pieces: int) -> None:
    data = b'data: {"a": 1}\n\ndata: {"b": "\xc3\xa9\xff"}\n\n'
    caught = error(data, pieces)
    assert caught.line == 3
    assert caught.problem == "not UTF-8 text (byte 0xff at offset 31)"


def test_a_stream_ending_inside_a_character_is_not_utf8() -> None:
    caught = error(b'{"a": 1}\n{"b": "\xf0\x9f\x98')
    assert (caught.line, caught.problem) == (
        2,
        "not UTF-8 text (the stream ends inside a character)",
    )


def test_an_error_on_an_earlier_line_of_the_same_piece_is_the_one_reported() -> None:
    caught = error(b'{"a": 1}\n{"a": nope}\n\xff\n')
    assert caught.line == 2
    assert "not JSON" in caught.problem


@pytest.mark.parametrize(
    ("data", "line", "problem"),
    [
        (b'data: {"a": 1}\n\ndata: [1, 2]\n\n', 3, "a stream chunk must be a JSON object, not an array"),  # noqa: E501
        (b'{"a": 1}\n"text"\n', 2, "a stream chunk must be a JSON object, not a string"),
        (b"[1]", 1, "a stream chunk must be a JSON object, not a number"),
        (b'[{"a": 1},\n null]', 2, "a stream chunk must be a JSON object, not null"),
        # A trailing comma is named at the comma on every Python (3.11 reported the "}").
        (b'data: {"a":\ndata: 1,\ndata: }\n\n', 2, "the data is not JSON (Illegal trailing comma before end of object"),  # noqa: E501
        (b'data: {"a": 1}\ndata: {"b": 2}\n\n', 2, "the data is not JSON (Extra data"),
        (b'[{"a": 1}\n{"b": 2}]', 2, "the JSON array's chunks must be separated by commas"),
        (b'[{"a": 1},\n\n{"b": x}]', 3, "the array is not JSON (Expecting value, column 7)"),
        (b'{"a": NaN}\n', 1, "the data is not JSON (NaN is not a JSON value)"),
        (b'{"a": -Infinity}\n', 1, "the data is not JSON (-Infinity is not a JSON value)"),
        (b'{"a": ' + b"1" * 5000 + b"}\n", 1, "the data holds a number too long to read"),
        (b'\n\n{"a": ' + b"[" * 100_000 + b"\n", 3, "the data is nested too deeply to read"),
        (b"data: " + b"[" * 100_000 + b"\n\n", 1, "the data is nested too deeply to read"),
        (b"[" * 100_000, 1, "the array is nested too deeply to read"),
    ],
    ids=[
        "sse-array-chunk", "ndjson-string", "array-number", "array-null", "sse-multiline-data",
        "sse-without-blank-lines", "array-without-commas", "array-bad-element", "nan",
        "infinity", "huge-integer", "ndjson-deep", "sse-deep", "array-deep",
    ],
)  # fmt: skip
def test_what_is_not_a_stream_is_refused_naming_the_line(
    data: bytes, line: int, problem: str
) -> None:
    for pieces in (1, 7):
        caught = error(data, pieces)
        assert caught.line == line
        assert caught.problem.startswith(problem)


# -- a stream cut short --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "chunks", "note"),
    [
        (b'data: {"a": 1}\n\ndata: {"b": [1, 2', [{"a": 1}], "line 3"),
        (b'data: {"a": 1}\n\ndata: {"b": "unfinished', [{"a": 1}], "line 3"),
        (b'{"a": 1}\n{"b": {"c"', [{"a": 1}], "line 2"),
        (b'[{"a": 1},\n{"b": ', [{"a": 1}], "line 2"),
    ],
    ids=["sse", "sse-in-a-string", "ndjson", "array"],
)
def test_a_stream_cut_inside_its_last_chunk_keeps_the_chunks_before(
    data: bytes, chunks: list[dict[str, Any]], note: str
) -> None:
    read_chunks, reader = read([data])
    assert read_chunks == chunks
    assert reader.notes == [f"{note}: the stream is cut off inside this chunk"]
    assert not reader.done


def test_a_json_array_without_its_closing_bracket_is_noted() -> None:
    chunks, reader = read([b'[{"a": 1},\n{"b": 2}\n'])
    assert chunks == [{"a": 1}, {"b": 2}]
    assert reader.notes == ["line 3: the JSON array is cut off (no closing bracket)"]


def test_a_wrong_last_line_is_an_error_not_a_cut() -> None:
    caught = error(b'{"a": 1}\n{"b": nope}')
    assert caught.line == 2


def test_text_after_the_json_array_is_noted() -> None:
    chunks, reader = read([b'[{"a": 1}]\n\n[{"b": 2}]\n'])
    assert chunks == [{"a": 1}]
    assert reader.notes == ["line 3: what follows the end of the stream is ignored"]


# -- found in review ----------------------------------------------------------------------------


FULL_LINE = '{"t": true, "f": false, "n": null, "d": -12.5e+3, "e": "x\\u00e9\\ud83d\\ude00"}'


@pytest.mark.parametrize("framing", ["sse", "ndjson", "array"])
def test_a_stream_cut_at_any_character_of_its_last_chunk_is_a_cut_not_an_error(
    framing: str,
) -> None:
    # Cut inside a literal (tru), a number (-12., 1e+) or an escape (\u00) too, not only
    # where the decoder reads to the end of the text.
    head = {"sse": 'data: {"a": 1}\n\ndata: ', "ndjson": '{"a": 1}\n', "array": '[{"a": 1},\n'}
    for end in range(1, len(FULL_LINE)):
        read_chunks, reader = read([(head[framing] + FULL_LINE[:end]).encode()])
        assert read_chunks == [{"a": 1}], end
        assert reader.notes == ["line 2: the stream is cut off inside this chunk"] or (
            framing == "sse" and reader.notes == ["line 3: the stream is cut off inside this chunk"]
        ), (end, reader.notes)


@pytest.mark.parametrize("wrong", ['{"b": tx}', '{"b": -x}', '{"b": 1.x}', '{"b": nul }'])
def test_a_wrong_token_in_the_last_line_is_still_an_error(wrong: str) -> None:
    assert error(('{"a": 1}\n' + wrong).encode()).line == 2


def test_what_feed_returned_earlier_does_not_change_with_later_pieces() -> None:
    reader = WireReader()
    first = reader.feed(b'data: {"a"')  # completes nothing yet
    second = reader.feed(b": 1}\n\n")
    assert first == []
    assert second == [{"a": 1}]
    gathered = reader.feed(b'data: {"b"')
    gathered += reader.feed(b": 2}\n\n")
    assert gathered == [{"b": 2}]
