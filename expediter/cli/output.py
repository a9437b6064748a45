"""Printing for the command line: JSON documents, JSON lines and plain tables.

Everything printed here may carry text a model or a tool wrote (call ids, names, arguments,
results, errors) or a pack declared (tool and pack names, descriptions). ``escape`` is the one
way such text reaches a terminal: control characters, bidi overrides and lone surrogates are
shown as visible escapes (``\\x1b``, ``\\u202e``), so no value can hide, reorder or rewrite
what an operator reads, and a newline cannot break a table row.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click

from expediter.core.records.text import truncate

__all__ = [
    "dump_json",
    "echo_json",
    "echo_json_line",
    "echo_table",
    "escape",
    "event_text",
    "shorten",
    "unescape",
    "warn",
]

# Besides C0, DEL and C1: the bidi embeddings, overrides and isolates (and the marks), the
# line and paragraph separators, and lone surrogates (which no terminal encoding can print).
_BIDI_AND_SURROGATES = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_PATTERNS = {
    # Any text on one line.
    "line": f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SURROGATES}]",
    # A multi-line text (a tool's string result): newline and tab are kept.
    "lines": f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_AND_SURROGATES}]",
    # JSON text escapes C0 itself; what ``ensure_ascii=False`` leaves raw is escaped alike.
    "json": f"[\x7f-\x9f{_BIDI_AND_SURROGATES}]",
    # What ``escape`` writes, read back by ``unescape``.
    "escaped": r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[nrt])",
}
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@functools.cache
def _pattern(kind: str) -> re.Pattern[str]:
    # Compiled on first use (~1 ms for the three): `expediter --help` prints nothing escaped
    # and stays within 0.1x `llm --help` (benchmarks/README.md).
    return re.compile(_PATTERNS[kind])


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, *, keep_newlines: bool = False) -> str:
    """Text safe to print on a terminal: control characters (C0, DEL, C1), bidi controls and
    lone surrogates as visible escapes; with ``keep_newlines``, newline and tab stay."""
    if text.isprintable():  # the usual case: nothing to replace
        return text
    return _pattern("lines" if keep_newlines else "line").sub(_escaped, text)


def unescape(text: str) -> str:
    """The text ``escape`` was given, from what it printed (a key an operator pastes back)."""
    if "\\" not in text:
        return text
    return _pattern("escaped").sub(_unescaped, text)


def _unescaped(match: re.Match[str]) -> str:
    code = match.group(1)
    return {"n": "\n", "r": "\r", "t": "\t"}.get(code) or chr(int(code[1:], 16))


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dump_json(data: Any, *, indent: int | None = None) -> str:
    """JSON text of ``data`` for a terminal: non-ASCII text kept, and the characters ``escape``
    shows that JSON itself would print raw written as ``\\uXXXX`` (the same document)."""
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text if text.isprintable() else _pattern("json").sub(_json_escape, text)


def echo_json(data: Any) -> None:
    """Print one JSON document."""
    click.echo(dump_json(data, indent=2))


def echo_json_line(data: Any) -> None:
    """Print one JSON document on one line (a stream of events)."""
    click.echo(dump_json(data))


def shorten(text: str, width: int, *, collapse: bool = True) -> str:
    """Cut text to a width with an ellipsis, escaped (``escape``); runs of whitespace become
    one space unless ``collapse`` is False (a key, which must read back as it is)."""
    return truncate(escape(" ".join(text.split()) if collapse else text), width, "…")


def event_text(event: Any, width: int) -> str:
    """One line for an event's table row: its error or reason, else its result as JSON."""
    text = event.error or event.reason
    return shorten(text or ("" if event.result is None else json.dumps(event.result)), width)


def echo_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows under headers, columns padded to their widest cell; every cell escaped."""
    cells = [[escape(str(cell)) if cell is not None else "" for cell in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    for row in [list(headers), *cells]:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def warn(message: str) -> None:
    """Print a warning on standard error (escaped)."""
    click.echo(f"warning: {escape(message)}", err=True)


def stdout_is_terminal() -> bool:
    """Whether standard output is a terminal."""
    return sys.stdout.isatty()
