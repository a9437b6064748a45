"""Records that travel through the host: a model's tool call and the events a call produces."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from expediter.core.records.convert import json_form, json_value, unstructure
from expediter.core.records.statuses import LEDGER_STATUSES, EventStatus
from expediter.core.records.text import json_text, truncate

__all__ = [
    "DISPLAY_LIMIT",
    "LEDGER_STATUSES",
    "NO_EXTRAS",
    "CallEvent",
    "EventStatus",
    "ToolCall",
    "display_copy",
    "new_run_id",
]

#: Characters of a result kept in an event (the copy shown in UIs and logs).
DISPLAY_LIMIT = 2000


# Run ids: a per-process prefix (start time, then random) and a counter, so they are unique
# across processes and ledger keys arrive in order (the primary-key index grows at its end
# instead of splitting pages all over: measurably faster inserts).
_RUN_PREFIX = f"{time.time_ns():016x}{os.urandom(4).hex()}"
_RUN_COUNTER = itertools.count()


def new_run_id() -> str:
    """A fresh run id: unique across processes, ordered by time within one."""
    return f"{_RUN_PREFIX}{next(_RUN_COUNTER):08x}"


#: The extras of a call that has none: one shared, read-only mapping (a new dict per call
#: would be one more object for the garbage collector to track, once per call).
NO_EXTRAS: Mapping[str, Any] = MappingProxyType({})


@json_form(
    keys=("call_id", "name", "instance_id", "tool", "action", "arguments", "error", "extras"),
    dump={"extras": json_value},
)
@attrs.frozen
class ToolCall:
    """One tool call proposed by a model, mapped back to a tool instance and action."""

    call_id: str
    #: The function name the model used (as offered in this turn's schemas).
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    instance_id: str | None = None
    tool: str | None = None
    action: str | None = None
    #: Why the call cannot run as proposed (unknown name, malformed arguments), or None.
    error: str | None = None
    #: Provider-specific data to send back unchanged (e.g. Gemini's thought signature).
    extras: Mapping[str, Any] = NO_EXTRAS

    @property
    def resolved(self) -> bool:
        """Whether the name maps to a tool instance and action."""
        return self.instance_id is not None and self.action is not None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form used by ``expediter parse`` (bytes extras as base64)."""
        return unstructure(self)


def display_copy(value: Any, limit: int = DISPLAY_LIMIT) -> Any:
    """Return a result as is when its JSON form is short, else a cut string with a marker."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = json_text(value)
    return value if len(text) <= limit else truncate(text, limit)


@json_form(
    keys=(
        "status",
        "key",
        "call_id",
        "name",
        "tool",
        "action",
        "arguments",
        "result",
        "error",
        "error_type",
        "duration_ms",
        "instance_id",
        "user_id",
        "owner_id",
        "reason",
        "note",
    ),
    dump={"result": display_copy},
)
# Not slotted: a frozen class without slots is built faster, once per call (the turn budget).
@attrs.frozen(kw_only=True, slots=False)
class CallEvent:
    """What happened to one call: pending, awaiting approval, denied, completed or error."""

    status: EventStatus
    key: str
    call_id: str
    name: str
    tool: str | None
    action: str | None
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    #: The full result value (JSON data); ``to_dict`` carries the display copy.
    result: Any = None
    error: str | None = None
    #: The kind of error: ``ArgumentError``, ``ToolNotFound``, ``ToolError`` or an exception type.
    error_type: str | None = None
    duration_ms: float | None = None
    instance_id: str | None = None
    user_id: str | None = None
    #: The user who owns the tool instance (its configuration and credentials).
    owner_id: str | None = None
    #: Why a call waits for approval or was denied.
    reason: str | None = None
    #: What the host changed in the result to send it (e.g. NaN sent as null), or None.
    note: str | None = None
    #: The result as the model reads it (JSON text, bounded), for completed calls of a turn.
    content: str | None = attrs.field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """Whether the call completed without error."""
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        """Return the stable JSON form of the event (the result as its display copy)."""
        return unstructure(self)
