"""How much of what a model sends the host carries: arguments nest at most ``MAX_DEPTH`` levels
(deeper would exhaust the recursion of every step that walks them: redaction, binding, the
ledger), numbers are JSON numbers (no NaN or infinities) and integers are short enough to
print. One check, used where provider JSON is decoded and again by the executor for calls
built in Python."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "INT_BITS",
    "INT_DIGITS",
    "LARGEST_INT",
    "MAX_DEPTH",
    "PLAIN",
    "SMALLEST_INT",
    "json_problem",
]

#: How deep a call's arguments may nest (objects and arrays).
MAX_DEPTH = 64
#: The longest integer Python turns into text (its ``int_max_str_digits``), in digits and bits.
INT_DIGITS = sys.get_int_max_str_digits() or 4300
INT_BITS = int(INT_DIGITS * 3.32)
#: Integers are checked against these bounds by comparison, not a method call (the turn budget).
LARGEST_INT = 2**INT_BITS
SMALLEST_INT = -LARGEST_INT
#: Values that need no look (the common argument has only these).
PLAIN = frozenset({str, bool, type(None)})


def json_problem(value: Any, *, strict: bool = True) -> str | None:
    """What makes arguments unfit to carry, or None: nesting deeper than ``MAX_DEPTH``, NaN or
    infinite numbers, integers too long to print; with ``strict`` (decoded provider JSON)
    also keys that are not text and values JSON does not have."""
    if type(value) is dict:
        nested = False
        for item in value.values():  # the common call: flat, numbers at most
            kind = type(item)
            if kind is int:
                if not SMALLEST_INT < item < LARGEST_INT:
                    return "the arguments hold an integer too long to read"
            elif kind is float:
                if item - item != 0.0:  # NaN or an infinity
                    return f"the arguments hold {item}, which is not a JSON number"
            elif kind not in PLAIN:
                nested = True
        if not nested and not (strict and not all(type(key) is str for key in value)):
            return None
    return _walk(value, strict)


def _walk(value: Any, strict: bool) -> str | None:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind in PLAIN or isinstance(item, str):
            continue
        if kind is int or kind is float or isinstance(item, int | float):
            if isinstance(item, bool):
                continue
            if isinstance(item, float):
                if item - item != 0.0:
                    return f"the arguments hold {item}, which is not a JSON number"
            elif not SMALLEST_INT < item < LARGEST_INT:
                return "the arguments hold an integer too long to read"
        elif kind is dict or isinstance(item, Mapping):
            if depth >= MAX_DEPTH:
                return f"the arguments nest more than {MAX_DEPTH} levels deep"
            for key, child in item.items():
                if strict and type(key) is not str:
                    return f"the arguments' names must be strings, not {type(key).__name__}"
                stack.append((child, depth + 1))
        elif kind is list or kind is tuple or isinstance(item, list | tuple):
            if depth >= MAX_DEPTH:
                return f"the arguments nest more than {MAX_DEPTH} levels deep"
            stack.extend((child, depth + 1) for child in item)
        elif strict:
            return f"the arguments hold a value of type {kind.__name__}, which JSON does not have"
    return None
