"""Reading JSON the same way on every supported Python: how deep a document may nest, and how
a decoding error is worded.

``json`` itself differs between versions: 3.13 reads a document nested 5,000 levels deep that
3.11 refuses with a ``RecursionError``, and words a trailing comma as its own error where 3.11
reports the bracket after it. A document's depth is therefore counted in its text
(``nests_deeper``) before any parser sees it, and ``decode_error`` words every error as 3.13
does.
"""

from __future__ import annotations

import itertools
import json
import re

__all__ = ["MAX_DOCUMENT_DEPTH", "TOO_DEEP", "decode_error", "nests_deeper", "read_json"]

#: How deep a whole JSON document read from a file or a stream may nest: room for arguments
#: nested ``MAX_DEPTH`` deep inside any provider's envelope, and well inside what every
#: supported Python's parser reads from any stack depth.
MAX_DOCUMENT_DEPTH = 256
#: What a document nested deeper than that is, after its name.
TOO_DEEP = f"is nested too deeply to read (more than {MAX_DOCUMENT_DEPTH} levels)"

#: A JSON string (escapes included, perhaps unterminated), and anything that is not a bracket:
#: removed before counting.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_WHITESPACE = " \t\n\r"
#: What 3.11 and 3.12 say at the bracket after a trailing comma.
_BEFORE_CLOSING = {
    "}": "Expecting property name enclosed in double quotes",
    "]": "Expecting value",
}


def nests_deeper(text: str, limit: int, start: int = 0, end: int | None = None) -> bool:
    """Whether JSON text (``text[start:end]``) opens more than ``limit`` objects and arrays
    inside one another (brackets inside strings do not count); text that is not JSON is
    measured all the same."""
    if text.count("[", start, end) + text.count("{", start, end) <= limit:
        return False  # the common document: one C-speed count, no scan
    if start or end is not None:
        text = text[start:end]
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def decode_error(exc: json.JSONDecodeError) -> json.JSONDecodeError:
    """The error as Python 3.13 words it (a trailing comma is named, at the comma), whichever
    version raised it: the same message and position everywhere."""
    doc, pos = exc.doc, exc.pos
    closing = doc[pos : pos + 1]
    if _BEFORE_CLOSING.get(closing) != exc.msg:
        return exc
    before = doc[:pos].rstrip(_WHITESPACE)
    if not before.endswith(",") or before[:-1].rstrip(_WHITESPACE)[-1:] in ("", "[", "{", ","):
        return exc
    kind = "object" if closing == "}" else "array"
    return json.JSONDecodeError(
        f"Illegal trailing comma before end of {kind}", doc, len(before) - 1
    )


def read_json(text: str) -> object:
    """``json.loads`` that behaves the same on every Python; ``ValueError`` saying what is
    wrong as a predicate for the text's name (``is not valid JSON: ...``, ``is nested too deeply
    ...``, ``holds a number too long to read``)."""
    if nests_deeper(text, MAX_DOCUMENT_DEPTH):
        raise ValueError(TOO_DEEP)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON: {decode_error(exc)}") from None
    except RecursionError:  # within the limit, but deeper than this stack has room for
        raise ValueError(TOO_DEEP) from None
    except ValueError:  # an integer longer than Python reads (int_max_str_digits)
        raise ValueError("holds a number too long to read") from None
