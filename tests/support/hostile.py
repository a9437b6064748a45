"""A tool pack written to misbehave: each action breaks one promise a tool should keep."""

from __future__ import annotations

import sys
from typing import Any

import expediter


class UnprintableError(Exception):
    """An exception that cannot say what it is."""

    def __str__(self) -> str:
        raise RuntimeError("str() of this exception raises")


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


class Hostile(expediter.Toolbox):
    """Tools that misbehave in every way a call must survive."""

    name = "hostile"

    @expediter.action
    def unprintable(self) -> str:
        """Raise an exception whose str() raises."""
        raise UnprintableError()

    @expediter.action
    def bad_message(self) -> str:
        """Raise a ToolError whose message is not text."""
        raise expediter.ToolError(object())  # type: ignore[arg-type]

    @expediter.action
    def huge_int(self) -> int:
        """Return an integer too long for text."""
        return 10**5000

    @expediter.action
    def not_a_number(self) -> Any:
        """Return NaN and Infinity."""
        return {"ratio": float("nan"), "limit": float("inf")}

    @expediter.action
    def exits(self) -> str:
        """Call sys.exit in a sync tool."""
        sys.exit(3)

    @expediter.action
    async def exits_async(self) -> str:
        """Call sys.exit in an async tool."""
        sys.exit(4)

    @expediter.action
    def surrogate(self) -> str:
        """Return a lone surrogate."""
        return "half \ud800 a pair"

    @expediter.action
    def nul(self) -> Any:
        """Return NUL in keys and values."""
        return {"a\x00b": "c\x00d"}

    @expediter.action
    def opaque(self) -> Any:
        """Return a value with no JSON form."""
        return object()

    @expediter.action
    def deep(self) -> Any:
        """Return a value nested 10,000 deep."""
        return _deep(10_000)

    @expediter.action
    def in_band(self) -> Any:
        """Report an error in band, with an object as the error."""
        return {"status": "error", "error": {"code": 7, "why": "refused"}}

    @expediter.action
    def fine(self) -> str:
        """Behave."""
        return "fine"

    @expediter.action
    async def fine_async(self) -> str:
        """Behave, asynchronously."""
        return "fine async"


#: Each misbehaving action, and the event status it must end in.
EXPECTED = {
    "unprintable": ("error", "UnprintableError"),
    "bad_message": ("error", "ToolError"),
    "huge_int": ("error", "ResultError"),
    "not_a_number": ("completed", None),
    "exits": ("error", "SystemExit"),
    "exits_async": ("error", "SystemExit"),
    "surrogate": ("completed", None),
    "nul": ("completed", None),
    "opaque": ("error", "ResultError"),
    "deep": ("error", "ResultError"),
    "in_band": ("error", "ToolError"),
    "fine": ("completed", None),
    "fine_async": ("completed", None),
}
