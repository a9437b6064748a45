"""A captured stream read back into its chunks, exactly as it was saved from the wire.

Three framings are read, told apart by the first character that is not white space:

- server-sent events (OpenAI, Mistral, Anthropic, the Responses API, Gemini's ``alt=sse``):
  ``event:`` / ``data:`` lines, events separated by a blank line, the ``data`` lines of one event
  joined with a newline, ``:`` comments, ``data: [DONE]`` ending the stream;
- NDJSON (Ollama): one JSON object per line (a line starting with ``{``);
- a JSON array of chunks (Gemini's ``streamGenerateContent`` without ``alt=sse``: ``[``).

Bytes arrive in pieces of any size: a UTF-8 character, a ``\\r\\n`` or a JSON value split
between two pieces reads the same as whole. Line ends may be ``\\n``, ``\\r\\n`` or ``\\r``.
What is not a stream (invalid UTF-8, a data line that is not JSON, a chunk that is not an
object, nesting too deep to read) is a ``WireError`` naming the line; a stream cut off inside
its last chunk keeps the chunks before it and says so in ``notes``.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any, Final

from expediter.core.records.jsonread import MAX_DOCUMENT_DEPTH, TOO_DEEP, decode_error, nests_deeper
from expediter.core.turns.providers.base import NotJSON, refuse_constant
from expediter.errors import ArgumentError

__all__ = ["READ_SIZE", "WireError", "WireReader", "read_wire"]

#: How many bytes a reader of a file asks for at a time (any size reads the same).
READ_SIZE: Final = 1 << 16

_LINE_END = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\n\r"


class WireError(ArgumentError):
    """A captured stream that cannot be read; ``line`` is the (1-based) line it fails at."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


_DECODER = json.JSONDecoder(parse_constant=refuse_constant)
_decode = _DECODER.decode
_raw_decode = _DECODER.raw_decode


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


#: What the decoder stops at when text ends inside a token: a literal (``tru``), a number's
#: sign, fraction or exponent (``-``, ``12.``, ``1e+``), an escape (``\\``, ``\\u00``).
_CUT_TOKEN = re.compile(r"t(?:ru?)?|f(?:a(?:ls?)?)?|n(?:ul?)?|-|\.|[eE][+-]?|u[0-9a-fA-F]{0,4}|\\")


def _cut_off(exc: json.JSONDecodeError, text: str) -> bool:
    """Whether a decode failed only because the text ends too early (a stream cut short),
    as opposed to text that is wrong where it stands."""
    text = text.rstrip(_WHITESPACE)
    return (
        exc.pos >= len(text)
        or exc.msg.startswith("Unterminated string")
        or _CUT_TOKEN.fullmatch(text, exc.pos) is not None
    )


def _problem(exc: ValueError | RecursionError, what: str) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{what} is not JSON ({exc.msg}, column {exc.colno})"
    if isinstance(exc, NotJSON):
        return f"{what} is not JSON ({exc})"
    if isinstance(exc, RecursionError):
        return f"{what} {TOO_DEEP}"
    return f"{what} holds a number too long to read"  # Python's int_max_str_digits


class WireReader:
    """Push the bytes of a captured stream with ``feed``, as they come, and ``close`` at the
    end; each returns the chunks (JSON objects) completed by what it was given."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._offset = 0  # bytes given to the decoder before this piece
        self._started = False
        self._line = 1  # the line now being read
        self._pieces: list[str] = []  # of that line, so far
        self._cr = False  # the last piece ended in "\r": a "\n" next ends no further line
        self._out: list[dict[str, Any]] = []
        #: ``"sse"``, ``"ndjson"`` or ``"json"`` (an array), once the first line says which.
        self.framing: str | None = None
        #: Whether the stream's end marker (``data: [DONE]``, the array's ``]``) was read.
        self.done = False
        #: What was read but not used: a cut-off last chunk, text after the end marker.
        self.notes: list[str] = []
        # server-sent events: the event being gathered
        self._data: list[str] = []
        self._data_line = 0
        # a JSON array: its text not yet read into chunks, and where that text begins
        self._array: list[str] = []
        self._array_size = 0
        self._array_line = 0
        self._array_state = "["  # what comes next: "[", "value", "," (or "]"), "end"
        self._next_try = 0
        self._count = 0
        self._after_end_noted = False

    # -- bytes to lines ---------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview | str) -> list[dict[str, Any]]:
        """Take the next piece of the stream (bytes, or text already decoded); returns the
        chunks it completes. ``WireError`` when the stream cannot be read."""
        if self.done:
            self._after_end(data)
            return []
        if isinstance(data, str):
            text = data
        else:
            pending = self._decoder.getstate()[0]
            try:
                text = self._decoder.decode(data)
            except UnicodeDecodeError as exc:
                self._not_utf8(exc, pending)  # unless the stream ended before the bad byte
                self._after_end(b"x")
                return self._take()
            self._offset += len(data)
        self._text(text)
        return self._take()

    def close(self) -> list[dict[str, Any]]:
        """End the stream; returns the chunks its last piece completes."""
        if self.done:
            self._after_end("".join(self._pieces))
            self._pieces = []
            return []
        pending = self._decoder.getstate()[0]
        try:
            self._text(self._decoder.decode(b"", final=True))
        except UnicodeDecodeError as exc:
            self._not_utf8(exc, pending)
            self._after_end(b"x")
            return self._take()
        if self._pieces:
            self._line_read("".join(self._pieces), last=True)
            self._pieces = []
        self._end()
        return self._take()

    def _after_end(self, data: bytes | bytearray | memoryview | str) -> None:
        # Not decoded: whatever follows the end marker (even binary) is not read, only noted.
        if not self._after_end_noted:
            blank = data.isspace() if isinstance(data, str) else bytes(data).isspace()
            if data and not blank:
                self._note_after_end(self._line)

    def _note_after_end(self, line: int) -> None:
        if not self._after_end_noted:
            self._after_end_noted = True
            self.notes.append(f"line {line}: what follows the end of the stream is ignored")

    def _take(self) -> list[dict[str, Any]]:
        # Always a list of the caller's own: one the reader kept filling would change under
        # a caller who holds an earlier (empty) answer.
        out = self._out
        self._out = []
        return out

    def _not_utf8(self, exc: UnicodeDecodeError, pending: bytes) -> None:
        """Raise ``WireError`` for a byte that is not UTF-8, unless the stream's end marker
        comes before it."""
        # Lines before the bad byte are read first: an earlier error is the one reported.
        self._text(exc.object[: exc.start].decode("utf-8", errors="replace"))
        if self.done:
            return
        offset = self._offset - len(pending) + exc.start
        if exc.reason == "unexpected end of data":
            problem = "not UTF-8 text (the stream ends inside a character)"
        else:
            problem = f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {offset})"
        raise WireError(self._line, problem) from None

    def _text(self, text: str) -> None:
        if not text:
            return
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._cr:
            self._cr = False
            if text[:1] == "\n":
                text = text[1:]
        if "\r" in text:
            parts = _LINE_END.split(text)
            self._cr = text[-1] == "\r"
        else:
            parts = text.split("\n")
        if len(parts) == 1:
            self._pieces.append(text)
            return
        first = parts[0]
        if self._pieces:
            self._pieces.append(first)
            first = "".join(self._pieces)
            self._pieces = []
        self._line_read(first)
        for index in range(1, len(parts) - 1):
            self._line_read(parts[index])
        if parts[-1]:
            self._pieces.append(parts[-1])

    # -- lines to chunks ----------------------------------------------------------------------

    def _line_read(self, line: str, last: bool = False) -> None:
        """One whole line (``last``: the stream's final line, which had no line end)."""
        framing = self.framing
        if framing is None:
            start = line.lstrip(_WHITESPACE)[:1]
            if not start:
                self._line += 1
                return
            framing = self.framing = "json" if start == "[" else "ndjson" if start == "{" else "sse"
            if framing == "json":
                self._array_line = self._line
        if self.done:
            if line.strip(_WHITESPACE):
                self._note_after_end(self._line)
        elif framing == "sse":
            self._sse_line(line)
        elif framing == "ndjson":
            if line.strip(_WHITESPACE):
                self._chunk(line, self._line, last)
        else:
            self._array.append(line)
            self._array.append("\n")
            self._array_size += len(line) + 1
            if self._array_size >= self._next_try:
                self._array_read(final=False)
        self._line += 1

    def _sse_line(self, line: str) -> None:
        if not line:
            self._dispatch(last=False)
            return
        if line[0] == ":":
            return  # a comment (a keep-alive)
        name, colon, value = line.partition(":")
        if name == "data":
            if colon and value[:1] == " ":
                value = value[1:]
            if not self._data:
                self._data_line = self._line
            self._data.append(value)
        # "event", "id", "retry" and unknown fields: the chunk's JSON says what it is.

    def _dispatch(self, last: bool) -> None:
        data = self._data
        if not data:
            return
        self._data = []
        text = data[0] if len(data) == 1 else "\n".join(data)
        stripped = text.strip(_WHITESPACE)
        if not stripped:
            return  # an event without data is no chunk
        if stripped == "[DONE]":
            self.done = True
            return
        self._chunk(text, self._data_line, last, sse=True)

    def _chunk(self, text: str, line: int, last: bool, sse: bool = False) -> None:
        if nests_deeper(text, MAX_DOCUMENT_DEPTH):
            raise WireError(line, f"the data {TOO_DEEP}")
        try:
            value = _decode(text)
        except json.JSONDecodeError as exc:
            if last and _cut_off(exc, text):
                self.notes.append(f"line {line}: the stream is cut off inside this chunk")
                return
            exc = decode_error(exc)
            hint = ""
            if sse and exc.msg == "Extra data":
                hint = " (server-sent events are separated by a blank line)"
            raise WireError(
                line + text.count("\n", 0, exc.pos), _problem(exc, "the data") + hint
            ) from None
        except (ValueError, RecursionError) as exc:
            raise WireError(line, _problem(exc, "the data")) from None
        if type(value) is not dict:
            raise WireError(line, f"a stream chunk must be a JSON object, not {_kind(value)}")
        self._out.append(value)

    def _array_chunk(self, text: str, pos: int) -> tuple[Any, int]:
        """The chunk that starts at ``pos`` and where it ends; too deep is refused by its
        text, whatever this Python's parser makes of it (3.11 gives up where 3.13 reads on)."""
        try:
            value, end = _raw_decode(text, pos)
        except (ValueError, RecursionError):
            deep = nests_deeper(text, MAX_DOCUMENT_DEPTH, pos)
            if not deep:
                raise
        else:
            deep = nests_deeper(text, MAX_DOCUMENT_DEPTH, pos, end)
            if not deep:
                return value, end
        raise WireError(self._line_at(text, pos), f"the array {TOO_DEEP}")

    def _array_read(self, final: bool) -> None:
        """Read what the array's text so far holds; ``final``: no more text comes."""
        text = "".join(self._array)
        pos, size, state = 0, len(text), self._array_state
        try:
            while True:
                while pos < size and text[pos] in _WHITESPACE:
                    pos += 1
                if pos == size:
                    break
                char = text[pos]
                if state == "end":
                    self._note_after_end(self._line_at(text, pos))
                    pos = size
                    break
                if state == "[":
                    state, pos = "value", pos + 1  # the framing was chosen by this "["
                    continue
                if state == ",":
                    if char == ",":
                        state, pos = "value", pos + 1
                        continue
                    if char == "]":
                        state, pos = "end", pos + 1
                        continue
                    raise WireError(
                        self._line_at(text, pos),
                        "the JSON array's chunks must be separated by commas",
                    )
                if char == "]" and self._count == 0:
                    state, pos = "end", pos + 1
                    continue
                try:
                    value, end = self._array_chunk(text, pos)
                except json.JSONDecodeError as exc:
                    if not final:
                        break  # perhaps only cut by the read: try again with more text
                    if _cut_off(exc, text):
                        self.notes.append(
                            f"line {self._line_at(text, pos)}: the stream is cut off inside "
                            "this chunk"
                        )
                        pos = size
                        break
                    exc = decode_error(exc)
                    raise WireError(
                        self._line_at(text, exc.pos), _problem(exc, "the array")
                    ) from None
                except (ValueError, RecursionError) as exc:
                    raise WireError(self._line_at(text, pos), _problem(exc, "the array")) from None
                if type(value) is not dict:
                    raise WireError(
                        self._line_at(text, pos),
                        f"a stream chunk must be a JSON object, not {_kind(value)}",
                    )
                self._out.append(value)
                self._count += 1
                state, pos = ",", end
        finally:
            self._array_state = state
            self._array_line += text.count("\n", 0, pos)
            rest = text[pos:]
            self._array = [rest] if rest else []
            self._array_size = len(rest)
            # Doubling what is tried keeps a chunk larger than one read linear, not quadratic.
            self._next_try = 2 * len(rest)
        if state == "end":
            self.done = True

    def _line_at(self, text: str, pos: int) -> int:
        return self._array_line + text.count("\n", 0, pos)

    def _end(self) -> None:
        if self.framing == "sse":
            if self._data:
                self._dispatch(last=True)
        elif self.framing == "json" and not self.done:
            self._array_read(final=True)
            if not self.done and not self.notes:
                self.notes.append(
                    f"line {self._array_line}: the JSON array is cut off (no closing bracket)"
                )


def read_wire(pieces: Iterable[bytes | bytearray | memoryview | str]) -> Iterator[dict[str, Any]]:
    """The chunks of a captured stream given as pieces of bytes (e.g. an HTTP client's
    ``iter_bytes()``, or a file read in blocks), as each completes. ``WireError`` when the
    stream cannot be read."""
    reader = WireReader()
    for piece in pieces:
        yield from reader.feed(piece)
    yield from reader.close()
