"""The documented fields the tests read back: those of a call's event and those of a ledger row
(docs/operations.md, "JSON shapes"; docs/ledger.md)."""

from __future__ import annotations

#: The fields every call event has (``CallEvent.to_dict()``, ``expediter call/run --json``).
EVENT_FIELDS = frozenset(
    {
        "status",
        "key",
        "call_id",
        "name",
        "tool",
        "action",
        "arguments",
        "result",
        "error",
        "duration_ms",
    }
)

#: The fields of ``ledger ls --json`` / ``ledger show --json`` (docs/ledger.md), in order.
LEDGER_FIELDS = (
    "key",
    "call_id",
    "message_id",
    "run_id",
    "user_id",
    "owner_id",
    "instance_id",
    "tool",
    "action",
    "status",
    "decision",
    "error",
    "attempted_at",
    "finished_at",
    "duration_ms",
)
