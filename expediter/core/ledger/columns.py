"""How values become column values: every Python string or JSON-able value is made storable on
both databases (JSON text, capped for results and arguments; text without NUL or lone
surrogates; keys of bounded length), plus attempt ids and the durations the operator's reads
filter by.

What the databases refuse, and what is stored instead (docs/ledger.md, "every call gets a
final row whatever it carries"): PostgreSQL ``text`` refuses NUL, ``jsonb`` refuses the escape
``\\u0000`` and lone surrogate escapes, and neither driver can encode a lone surrogate as UTF-8;
JSON has no NaN or Infinity; a btree index entry holds at most about 2,700 bytes. So NUL is
dropped, a lone surrogate becomes U+FFFD, a NaN or infinite float in a JSON value becomes
``null``, and identifiers that are indexed (keys, message ids, users) longer than
``KEY_LIMIT`` keep their beginning and a digest of the whole. The same rules apply on SQLite,
so both databases store the same values.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
from typing import Any, overload

from expediter.core.records.text import echo, truncate

__all__ = [
    "ARGUMENTS_LIMIT",
    "KEY_LIMIT",
    "RESULT_LIMIT",
    "TEXT_LIMIT",
    "capped",
    "column_text",
    "forks",
    "json_column",
    "new_attempt_id",
    "parse_duration",
    "stored_key",
]

#: Characters of a result's JSON kept in the ledger.
RESULT_LIMIT = 400_000
#: Characters of the arguments' JSON kept in the ledger.
ARGUMENTS_LIMIT = 65_536
#: Characters of a plain text column (an error, a reason, a name) kept in the ledger.
TEXT_LIMIT = 65_536
#: Characters of an indexed identifier (key, message id, user id): at most 4 UTF-8 bytes each,
#: well inside PostgreSQL's btree entry limit (about 2,700 bytes).
KEY_LIMIT = 512
#: The generator of attempt ids: its own (an application seeding ``random`` changes nothing),
#: seeded from the system and again in every forked child.
_IDS = random.Random()
_random_bits = _IDS.getrandbits
#: How many forks this process is from the one that imported the ledger (a ledger's lease
#: keeper thread does not survive a fork: a child starts its own).
_FORKS = [0]


def _after_fork_in_child() -> None:
    _IDS.seed()
    _FORKS[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.I)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def new_attempt_id() -> str:
    """A new attempt's id: 64 random bits as hex. It only tells one attempt of a key from
    another (it guards nothing secret), so a generator seeded from the system serves, without
    the system call ``os.urandom`` makes on every call (the per-call ledger budgets)."""
    return f"{_random_bits(64):016x}"


def parse_duration(text: str) -> float:
    """``90``, ``45s``, ``30m``, ``1h``, ``2d``, ``1w`` as seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"cannot read the duration {text!r}; use e.g. 45s, 30m, 1h, 2d")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


# -- text -----------------------------------------------------------------------------------

#: NUL dropped, lone surrogates (a Python str may hold them, UTF-8 cannot) as U+FFFD.
_UNSTORABLE: dict[int, str | None] = {0: None, **dict.fromkeys(range(0xD800, 0xE000), "\ufffd")}
_SURROGATE = re.compile("[\ud800-\udfff]")
_DROPPED = " ... [{} more characters not recorded]"
_DUPLICATE_MARK = "#dup-"


def _storable(text: str) -> str:
    """``text`` without NUL, its lone surrogates as U+FFFD."""
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    if "\x00" in text or _SURROGATE.search(text) is not None:
        return text.translate(_UNSTORABLE)
    return text


@overload
def column_text(value: str, limit: int = ...) -> str: ...
@overload
def column_text(value: None, limit: int = ...) -> None: ...
@overload
def column_text(value: str | None, limit: int = ...) -> str | None: ...
def column_text(value: str | None, limit: int = TEXT_LIMIT) -> str | None:
    """Text for a plain text column: without NUL (PostgreSQL refuses it) or lone surrogates
    (no driver can encode them), at most ``limit`` characters (saying how many were not
    recorded). A value that is not text (an application's call naming its action with a
    dict) is recorded as its quoted form, never handed to a driver that cannot bind it."""
    if type(value) is not str:
        if value is None:
            return None
        value = value.__str__() if isinstance(value, str) else echo(value)
    if not (value.isascii() and "\x00" not in value):
        value = _storable(value)
    if len(value) > limit:
        return truncate(value, limit, _DROPPED)
    return value


@overload
def stored_key(key: str) -> str: ...
@overload
def stored_key(key: None) -> None: ...
@overload
def stored_key(key: str | None) -> str | None: ...
def stored_key(key: str | None) -> str | None:
    """The form an indexed identifier (a call's key, a message id, a user id) is stored and
    looked up in: ``column_text``'s, and when longer than ``KEY_LIMIT``, its beginning and a
    digest of the whole (two long keys stay two keys). The same key always has the same
    form, a stored form is its own, and ``KEY#dup-N`` is stored as KEY's form and ``#dup-N``
    (so a duplicate of a key at the limit is found by its key too). A call's user id is
    identity: it reaches the ledger checked (``IdentifierError.check`` refuses one this would
    change), so its form is itself."""
    if type(key) is not str:
        return key
    if not (key.isascii() and "\x00" not in key):
        key = _storable(key)
    if len(key) <= KEY_LIMIT:
        return key
    # A duplicate's key (operations.duplicate_key) keeps its number after its call's key.
    base, mark, number = key.rpartition(_DUPLICATE_MARK)
    if mark and number.isdigit() and len(number) < 10:
        return f"{stored_key(base)}{mark}{number}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"{key[: KEY_LIMIT - 34]}…#{digest}"


# -- JSON -----------------------------------------------------------------------------------

_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
# The same encoding without building an encoder per value, nor checking for cycles (a cycle
# recurses until RecursionError, and then the careful path says what is wrong): half the
# time of ``_ENCODER.encode`` for the small values of every call (benchmarks/README.md,
# per-call ledger budgets). NaN and infinities raise ValueError (and take the careful path).
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_FAST_ENCODER: Any = (
    _MAKE_ENCODER(None, str, json.encoder.encode_basestring, None, ": ", ", ", False, False, False)
    if _MAKE_ENCODER is not None
    else None
)
_STRICT_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_NUL_ESCAPE = "\\u0000"


def json_column(value: Any) -> str | None:
    """The JSON text of a value (``default=str`` for what JSON cannot hold), or None; NUL
    dropped and lone surrogates as U+FFFD in its strings, NaN and infinities as ``null``."""
    if value is None:
        return None
    if _FAST_ENCODER is not None:
        try:
            text: str = "".join(_FAST_ENCODER(value, 0))
        except (ValueError, TypeError, RecursionError):
            return _careful_json(value)
        # The common value is plain: ASCII (no surrogates) and no escaped NUL.
        if _NUL_ESCAPE not in text and (text.isascii() or _SURROGATE.search(text) is None):
            return text
    return _careful_json(value)


def _careful_json(value: Any) -> str:
    """``json_column`` for a value the fast encoder refused or whose text needs cleaning."""
    try:
        return _STRICT_ENCODER.encode(_storable_json(value, 0))
    except (ValueError, TypeError, RecursionError) as exc:
        # A cycle, a value nested past the limit, an integer too long to print: the row still
        # says what was there (docs/ledger.md: every call gets a final row).
        reason = column_text(f"{type(value).__name__} that JSON cannot hold: {exc}", 2000)
        return _STRICT_ENCODER.encode(f"<not recorded: a {reason}>")


#: Containers nested deeper than this are recorded as their text (a cycle ends here too).
_DEPTH = 200


def _storable_json(value: Any, depth: int) -> Any:
    """A copy of ``value`` that encodes to what both databases take (see the module)."""
    if isinstance(value, str):
        return _storable(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth > _DEPTH:
        raise ValueError(f"nested deeper than {_DEPTH} levels (or a cycle)")
    if isinstance(value, dict):
        return {_storable_key(key): _storable_json(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_json(item, depth + 1) for item in value]
    return _storable(str(value))


def _storable_key(key: Any) -> Any:
    """A dict key as the JSON encoder writes it, made storable."""
    if isinstance(key, str):
        return _storable(key)
    if key is None or isinstance(key, bool | int):
        return key
    if isinstance(key, float):
        return key if math.isfinite(key) else str(key)
    return _storable(str(key))


def capped(value: Any, limit: int = RESULT_LIMIT) -> str | None:
    """The ledger's copy of a result (or of arguments): its JSON, or when that is longer than
    ``limit``, the beginning of a string itself (not of its JSON encoding) or of the JSON text
    of anything else, as a JSON string of at most ``limit`` characters saying how much was
    dropped."""
    encoded = json_column(value)
    if encoded is None or len(encoded) <= limit:
        return encoded
    text = _storable(value) if isinstance(value, str) else encoded
    return truncate(text, limit, _DROPPED, encode=_STRICT_ENCODER.encode)


def forks() -> int:
    """How many forks this process is from the one that imported the ledger."""
    return _FORKS[0]
