"""How values become column values: JSON text (capped for results), text without NUL,
attempt ids, and the durations the operator's reads filter by."""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any

from expediter.core.records.text import truncate

__all__ = [
    "RESULT_LIMIT",
    "capped",
    "column_text",
    "forks",
    "json_column",
    "new_attempt_id",
    "parse_duration",
]

#: Characters of a result's JSON kept in the ledger.
RESULT_LIMIT = 400_000
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


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
# The same encoding without building an encoder per value, nor checking for cycles (a cycle
# recurses until RecursionError, and then ``_ENCODER`` says what is wrong): half the time of
# ``_ENCODER.encode`` for the small values of every call (DESIGN.md section 9, per-call
# ledger budgets).
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_FAST_ENCODER: Any = (
    _MAKE_ENCODER(None, str, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    if _MAKE_ENCODER is not None
    else None
)


def json_column(value: Any) -> str | None:
    """The JSON text of a value (``default=str`` for what JSON cannot hold), or None."""
    if value is None:
        return None
    if _FAST_ENCODER is not None:
        try:
            return "".join(_FAST_ENCODER(value, 0))
        except RecursionError:
            pass
    return _ENCODER.encode(value)


def column_text(value: str | None) -> str | None:
    """Text for a column: PostgreSQL refuses NUL in text, so it never reaches the database."""
    return value.replace("\x00", "") if value and "\x00" in value else value


def capped(value: Any) -> str | None:
    """The ledger's copy of a result: its JSON, or when that is too long, the beginning of a
    string itself (not of its JSON encoding) or of the JSON text of anything else, as a JSON
    string of at most ``RESULT_LIMIT`` characters saying how much was dropped."""
    encoded = json_column(value)
    if encoded is None or len(encoded) <= RESULT_LIMIT:
        return encoded
    text = value if isinstance(value, str) else encoded
    marker = " ... [{} more characters not recorded]"
    return truncate(text, RESULT_LIMIT, marker, encode=_ENCODER.encode)


def forks() -> int:
    """How many forks this process is from the one that imported the ledger."""
    return _FORKS[0]
