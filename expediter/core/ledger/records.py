"""Ledger rows as records, and their stable JSON form."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import attrs

from expediter.core.records.convert import json_form, unstructure

__all__ = ["DeadLetter", "LedgerRow", "ToolStats", "iso"]


def iso(moment: float | None) -> str | None:
    """Seconds since the epoch as an ISO 8601 UTC timestamp."""
    if moment is None:
        return None
    return dt.datetime.fromtimestamp(moment, dt.UTC).isoformat(timespec="milliseconds")


def _json_value(value: Any) -> Any:
    if isinstance(value, str | bytes | bytearray):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


#: The documented keys first (docs/operations.md), then the known extras.
_ROW_KEYS = (
    "key", "call_id", "message_id", "run_id", "user_id", "owner_id", "instance_id", "tool",
    "action", "status", "decision", "error", "attempted_at", "finished_at", "duration_ms",
    "name", "arguments", "result", "decided_by", "decision_reason", "updated_at",
    "lease_expires_at", "worker_id", "late", "duplicate_of", "delegated_from",
)  # fmt: skip
_TIMES = ("attempted_at", "finished_at", "updated_at", "lease_expires_at")


@json_form(keys=_ROW_KEYS, dump=dict.fromkeys(_TIMES, iso))
@attrs.frozen(kw_only=True)
class LedgerRow:
    """One attempted tool call as recorded."""

    key: str
    call_id: str
    name: str | None = None
    message_id: str | None = None
    run_id: str | None = None
    user_id: str | None = None
    owner_id: str | None = None
    instance_id: str | None = None
    tool: str | None = None
    action: str | None = None
    arguments: Any = None
    decision: str | None = None
    decided_by: str | None = None
    decision_reason: str | None = None
    status: str
    result: Any = None
    error: str | None = None
    attempted_at: float
    updated_at: float
    finished_at: float | None = None
    duration_ms: float | None = None
    lease_expires_at: float | None = None
    worker_id: str | None = None
    attempt_id: str | None = None
    late: bool = False
    #: A paused call's resume data (tool, instance, action, arguments, ids).
    request: Any = None
    #: For a duplicate execution recorded on replay (key ``KEY#dup-N``): the ``KEY`` it
    #: duplicates (see ``Ledger.duplicates``).
    duplicate_of: str | None = None
    #: A call made with an instance another user owns: that owner's id.
    delegated_from: str | None = None

    @classmethod
    def from_db(cls, row: Mapping[str, Any]) -> LedgerRow:
        """Build from a database row (JSON columns may arrive as text)."""
        data = dict(row)
        data["arguments"] = _json_value(data.get("arguments"))
        data["result"] = _json_value(data.get("result"))
        data["request"] = _json_value(data.get("request"))
        data["late"] = bool(data.get("late"))
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (``expediter ledger ls --json`` / ``show --json``)."""
        return unstructure(self)


@attrs.frozen
class ToolStats:
    """Call counts and durations of one tool."""

    tool: str
    calls: int
    failures: int
    p50_ms: float | None
    p95_ms: float | None
    #: Calls whose worker died (or whose approval expired) before they finished.
    abandoned: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return unstructure(self)


@json_form(dump={"set_aside_at": iso})
@attrs.frozen(kw_only=True)
class DeadLetter:
    """A spooled write the database refused for good, set aside so later writes go on
    (``expediter ledger deadletters``)."""

    #: Names it for ``retry_deadletter`` / ``drop_deadletter``.
    id: str
    #: The ledger operation (``insert``, ``finish``, ``decide``, ...).
    operation: str
    #: The call's key (None for an operation on several calls, e.g. ``confirm``).
    key: str | None
    #: What the database answered.
    error: str
    #: When it was set aside (seconds since the epoch; ISO 8601 in the JSON form).
    set_aside_at: float
    #: The write's parameters, as spooled.
    params: dict[str, Any] = attrs.field(factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``expediter ledger deadletters --json``)."""
        return unstructure(self)
