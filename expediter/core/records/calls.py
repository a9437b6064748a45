"""Records that travel through the host: a model's tool call and the events a call produces."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = [
    "DISPLAY_LIMIT",
    "LEDGER_STATUSES",
    "CallEvent",
    "EventStatus",
    "ToolCall",
    "display_copy",
    "new_run_id",
]

EventStatus = Literal[
    "pending", "awaiting_approval", "requires_client_execution", "denied", "completed", "error"
]
#: Every status a ledger row (a call attempt) can be in.
LEDGER_STATUSES = (
    "proposed",
    "awaiting_approval",
    "approved",
    "denied",
    "executed",
    "confirmed",
    "failed",
    "abandoned",
)
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


def _dict(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value) if value else {}


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
    extras: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def resolved(self) -> bool:
        """Whether the name maps to a tool instance and action."""
        return self.instance_id is not None and self.action is not None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form used by ``expediter parse`` (bytes extras as base64)."""
        return {
            "call_id": self.call_id,
            "name": self.name,
            "instance_id": self.instance_id,
            "tool": self.tool,
            "action": self.action,
            "arguments": dict(self.arguments),
            "error": self.error,
            "extras": {key: _json_safe(value) for key, value in self.extras.items()},
        }


def _json_safe(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        import base64

        return base64.b64encode(value).decode("ascii")
    return value


def display_copy(value: Any, limit: int = DISPLAY_LIMIT) -> Any:
    """Return a result as is when its JSON form is short, else a cut string with a marker."""
    import json

    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= limit:
        return value
    marker = f" ... [{len(text) - limit} more characters]"
    return text[: limit - len(marker)] + marker


@attrs.frozen(kw_only=True)
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
    #: Why a call waits for approval or was denied.
    reason: str | None = None
    #: The result as the model reads it (JSON text, bounded), for completed calls of a turn.
    content: str | None = attrs.field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """Whether the call completed without error."""
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        """Return the stable JSON form of the event."""
        return {
            "status": self.status,
            "key": self.key,
            "call_id": self.call_id,
            "name": self.name,
            "tool": self.tool,
            "action": self.action,
            "arguments": dict(self.arguments),
            "result": display_copy(self.result),
            "error": self.error,
            "error_type": self.error_type,
            "duration_ms": self.duration_ms,
            "instance_id": self.instance_id,
            "user_id": self.user_id,
            "reason": self.reason,
        }
