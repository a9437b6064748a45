"""What a call brings in: its ledger key, and whether its arguments are JSON the host can
carry through every later step (the ledger, events, the model's messages)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from expediter.core.records.calls import ToolCall
from expediter.core.records.text import echo

__all__ = [
    "FLAT",
    "INT_BITS",
    "KEY_ID_CHARS",
    "LARGEST_INT",
    "MAX_ARGUMENT_DEPTH",
    "SMALLEST_INT",
    "argument_problem",
    "call_key",
    "key_prefix",
]

#: Argument values that need no look (the common call has only these).
FLAT = frozenset({str, bool, type(None)})
#: Arguments nested deeper than this are refused (no tool's schema needs more; deeper ones
#: would exhaust the recursion of every later step that walks them).
MAX_ARGUMENT_DEPTH = 64
#: An integer of more bits than this has more digits than Python turns into text.
INT_BITS = 14_000
#: Integers are checked against this bound by comparison, not a method call (the turn budget).
LARGEST_INT = 2**INT_BITS
#: Its negative, made once (negating a 14,000-bit integer allocates one).
SMALLEST_INT = -LARGEST_INT
#: Call ids longer than this are shortened (with a digest) in the ledger key.
KEY_ID_CHARS = 128


def call_key(call: ToolCall, prefix: str, seen: dict[str, int] | None) -> str:
    """The ledger key of a call: ``prefix`` (``message_id:`` or ``run_id:``) and its call id.
    A call id used again in the same turn (``seen`` counts them) gets ``#2``, ``#3``...: each
    call keeps its own row and event. An overlong id is shortened, with a digest of the
    whole."""
    call_id = call.call_id
    if type(call_id) is not str or len(call_id) > KEY_ID_CHARS:
        whole = str(call_id)
        digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        call_id = f"{whole[:64]}~{digest}"
    if seen is not None:
        count = seen.get(call_id, 0) + 1
        seen[call_id] = count
        if count > 1:
            return f"{prefix}{call_id}#{count}"
    return prefix + call_id


def key_prefix(message_id: str | None, run_id: str) -> str:
    """What the keys of a turn's calls begin with."""
    return f"{message_id}:" if message_id else f"{run_id}:"


def argument_problem(arguments: Mapping[str, Any]) -> str | None:
    """Why arguments are not JSON the host can carry (nested too deep, NaN or Infinity, an
    integer too long for text), or None."""
    nested = False
    for name, value in arguments.items():  # the common call: flat, numbers at most
        kind = type(value)
        if kind is int:
            if not SMALLEST_INT < value < LARGEST_INT:
                return f"argument {echo(name, 40)} is an integer too long to use"
        elif kind is float:
            if value - value != 0.0:  # NaN or an infinity
                return f"argument {echo(name, 40)} is {value!r}, which is not JSON: send a number"
        elif kind not in FLAT:
            nested = True
    if not nested:
        return None
    stack: list[tuple[Any, int, str]] = [(arguments, 0, "")]
    while stack:
        value, depth, path = stack.pop()
        kind = type(value)
        if kind is int or kind is float:
            if kind is float and value - value != 0.0:
                return f"argument {echo(path, 40)} is {value!r}, which is not JSON: send a number"
            if kind is int and value.bit_length() > INT_BITS:
                return f"argument {echo(path, 40)} is an integer too long to use"
        elif kind is dict or isinstance(value, Mapping):
            if depth >= MAX_ARGUMENT_DEPTH:
                return f"arguments nested more than {MAX_ARGUMENT_DEPTH} levels deep are refused"
            for key, item in value.items():
                if type(item) not in FLAT:
                    stack.append((item, depth + 1, path or str(key)[:40]))
        elif kind is list or kind is tuple:
            if depth >= MAX_ARGUMENT_DEPTH:
                return f"arguments nested more than {MAX_ARGUMENT_DEPTH} levels deep are refused"
            stack.extend((item, depth + 1, path) for item in value if type(item) not in FLAT)
    return None
