"""Safe text from untrusted values: control characters removed, JSON text, bounded length.

``truncate`` is the one way the host shortens text: the model's copy of a result (head and
tail kept), the event's display copy, the ledger's copy (bounded once JSON-encoded) and the
CLI's table cells all go through it. This module imports nothing heavy: the CLI uses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "CONTROL",
    "ECHO_LIMIT",
    "clean_text",
    "echo",
    "json_text",
    "model_copy",
    "one_line",
    "sanitize",
    "truncate",
]

#: Characters of a model-supplied value repeated in an error message (a name, an id, a value).
ECHO_LIMIT = 200

_ENCODER = json.JSONEncoder(ensure_ascii=False)
# NUL and the other control characters (tab, newline and carriage return are kept).
# Lone surrogates (valid in JSON text, not encodable as UTF-8) become U+FFFD.
CONTROL: dict[int, str | None] = {
    **dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127]),
    **dict.fromkeys(range(0xD800, 0xE000), "\ufffd"),
}


def sanitize(value: Any) -> Any:
    """JSON data with NUL and control characters removed from every string (keys too), and
    lone surrogates replaced by U+FFFD."""
    if isinstance(value, str):
        return value.translate(CONTROL) if not value.isprintable() else value
    if isinstance(value, list):
        return [sanitize(item) for item in value]
    if isinstance(value, dict):
        return {sanitize(key): sanitize(item) for key, item in value.items()}
    return value


def clean_text(text: str) -> str:
    """An error message without NUL or control characters (tab and newlines kept)."""
    return text if text.isprintable() else text.translate(CONTROL)


def one_line(text: str) -> str:
    """Text on one line, its runs of whitespace made one space, and a sentence that ended
    with its line still ended: a line without closing punctuation followed by one that starts
    a sentence gets a full stop (a driver's "...refused\n\tIs the server running...?" reads
    "...refused. Is the server running...?"; "two\n lines" reads "two lines")."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    kept = [line for line in lines if line]
    joined = []
    for line, following in zip(kept, [*kept[1:], ""], strict=False):
        ends = following[:1].isupper() and line[-1] not in _ENDS_CLAUSE
        joined.append(line + "." if ends else line)
    return " ".join(joined)


#: What ends a line that ``one_line`` joins to the next without a full stop.
_ENDS_CLAUSE = frozenset(".,;:!?-([{")


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """A value the model (or a tool) supplied, quoted for an error message: its repr without
    control characters, cut to about ``limit`` characters saying how many were left out."""
    if isinstance(value, str):
        text = value if len(value) <= limit else value[:limit]
        shown = repr(text)  # repr escapes control characters and lone surrogates
        if len(value) > limit:
            shown += f" ... [{len(value) - limit} more characters]"
        return shown
    try:
        shown = repr(value) if type(value) is not int or value.bit_length() < 600 else "an integer"
    except Exception:
        shown = f"<{type(value).__name__}>"
    return truncate(clean_text(shown), limit + 20)


def json_text(value: Any) -> str:
    """A value as JSON text (never its repr); a string is its own text."""
    if isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)
    if value is None or type(value) is bool:
        return "null" if value is None else ("true" if value else "false")
    return _ENCODER.encode(value)


def truncate(
    text: str,
    limit: int,
    marker: str = " ... [{} more characters]",
    *,
    tail: float = 0.0,
    encode: Callable[[str], str] | None = None,
) -> str:
    """``text`` if it fits in ``limit`` characters, else cut around a marker naming how many
    characters were left out (``marker`` is formatted with that number).

    ``tail`` is the share of the kept characters taken from the end (0: keep the beginning).
    With ``encode``, ``limit`` bounds the encoded text, which is returned (escapes grow text).
    """
    if encode is None:
        if len(text) <= limit:
            return text
        return _cut(text, _room(text, limit, marker), marker, tail)
    encoded = encode(text)
    if len(encoded) <= limit:
        return encoded
    overhead = len(encode(marker.format(len(text))))
    keep = max(0, limit - overhead)
    while True:
        encoded = encode(_cut(text, keep, marker, tail))
        if len(encoded) <= limit or keep == 0:
            return encoded
        # Escapes made the kept text longer: scale it down by how much it grew, at least by one.
        grown = max(1, len(encoded) - overhead)
        keep = max(0, min(keep - 1, keep * (limit - overhead) // grown))


def _room(text: str, limit: int, marker: str) -> int:
    """How many characters of ``text`` fit beside the marker within ``limit``."""
    # The marker's number never has more digits than the text's length; with the number it
    # will actually show, it may be shorter and leave room for a few more characters.
    keep = max(0, limit - len(marker.format(len(text))))
    more = max(0, limit - len(marker.format(len(text) - keep)))
    return more if more + len(marker.format(len(text) - more)) <= limit else keep


def _cut(text: str, keep: int, marker: str, tail: float) -> str:
    keep = max(0, min(keep, len(text)))
    back = int(keep * tail)
    front = keep - back
    return text[:front] + marker.format(len(text) - keep) + text[len(text) - back :]


def model_copy(value: Any, limit: int) -> str:
    """The text the model reads: JSON (never repr), cut to ``limit`` characters keeping its head
    and tail around a marker that says how much was left out."""
    text = value if type(value) is str else json_text(value)
    if len(text) <= limit:  # the usual case, once per call: no more function calls
        return text
    return truncate(text, limit, _MODEL_MARKER, tail=_MODEL_TAIL)


_MODEL_MARKER = "\n[... {} characters omitted ...]\n"
#: The model's copy keeps two thirds of its room from the start and one third from the end.
_MODEL_TAIL = 1 / 3
