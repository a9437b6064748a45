"""Every status a call can be in: its events, its ledger row, and the ledger's allowed moves.

One vocabulary for the whole host. The enums are ``StrEnum``s, so a member equals its string
(``CallStatus.COMPLETED == "completed"``) and JSON-encodes as that string. This module imports
nothing beyond the standard library: the CLI reads it for ``--help``.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Mapping
from typing import Literal

__all__ = [
    "ALLOWED",
    "EVENT_STATUSES",
    "EVENT_STATUS_OF",
    "FINAL_EVENT_STATUSES",
    "FINAL_LEDGER_STATUSES",
    "LEDGER_STATUSES",
    "PAUSED_EVENT_STATUSES",
    "CallStatus",
    "EventStatus",
    "LedgerStatus",
]


class CallStatus(enum.StrEnum):
    """Where a call stands, as its events report it (``CallEvent.status``)."""

    #: Accepted, not decided or run yet.
    PENDING = "pending"
    #: Waiting for a human's approval (persisted, so any worker can resume it).
    AWAITING_APPROVAL = "awaiting_approval"
    #: A client-side tool: the application runs it and submits the result.
    REQUIRES_CLIENT_EXECUTION = "requires_client_execution"
    DENIED = "denied"
    COMPLETED = "completed"
    ERROR = "error"


#: ``CallStatus`` as a ``Literal`` of its values, for annotations that take plain strings.
#: Python cannot spell a ``Literal`` from an enum, so it is written out here, next to the enum,
#: and checked against it when this module is imported.
EventStatus = Literal[
    "pending", "awaiting_approval", "requires_client_execution", "denied", "completed", "error"
]


class LedgerStatus(enum.StrEnum):
    """Where a call stands in the ledger (``tool_call_attempts.status``)."""

    PROPOSED = "proposed"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    DENIED = "denied"
    EXECUTED = "executed"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    #: The worker died (its lease expired) or the approval expired before the call finished.
    ABANDONED = "abandoned"


#: Every event status, as plain strings, in declaration order.
EVENT_STATUSES: tuple[str, ...] = tuple(status.value for status in CallStatus)
#: The event statuses of a call that is not finished: it waits for someone.
PAUSED_EVENT_STATUSES: frozenset[str] = frozenset(
    {CallStatus.PENDING, CallStatus.AWAITING_APPROVAL, CallStatus.REQUIRES_CLIENT_EXECUTION}
)
#: The event statuses of a finished call.
FINAL_EVENT_STATUSES: frozenset[str] = frozenset(EVENT_STATUSES) - PAUSED_EVENT_STATUSES
#: Every ledger status, as plain strings (``click.Choice``, the table's CHECK constraint).
LEDGER_STATUSES: tuple[str, ...] = tuple(status.value for status in LedgerStatus)


def _moves(*targets: LedgerStatus) -> frozenset[str]:
    return frozenset(target.value for target in targets)


_L = LedgerStatus
#: The transitions the ledger allows: ``from -> {to}`` (plain strings, every status a key).
ALLOWED: Mapping[str, frozenset[str]] = {
    _L.PROPOSED.value: _moves(
        _L.EXECUTED, _L.FAILED, _L.AWAITING_APPROVAL, _L.DENIED, _L.ABANDONED
    ),
    _L.AWAITING_APPROVAL.value: _moves(_L.APPROVED, _L.DENIED, _L.ABANDONED),
    _L.APPROVED.value: _moves(_L.EXECUTED, _L.FAILED, _L.ABANDONED),
    _L.EXECUTED.value: _moves(_L.CONFIRMED),
    _L.ABANDONED.value: _moves(_L.EXECUTED, _L.FAILED),  # a late result is still recorded
    # A call reported failed (timed out, its turn cancelled) whose tool still finished: its
    # result is recorded, marked late, like an abandoned call's (a late error changes nothing).
    _L.FAILED.value: _moves(_L.EXECUTED),
    _L.DENIED.value: _moves(),
    _L.CONFIRMED.value: _moves(),
}

#: The ledger statuses after which nothing more happens to a call (a late result aside).
FINAL_LEDGER_STATUSES: frozenset[str] = _moves(
    _L.EXECUTED, _L.CONFIRMED, _L.FAILED, _L.DENIED, _L.ABANDONED
)
#: The event a call's ledger status stands for (a client-side call awaiting its result is
#: ``requires_client_execution``, told apart by the row's decision).
EVENT_STATUS_OF: Mapping[str, CallStatus] = {
    _L.PROPOSED.value: CallStatus.PENDING,
    _L.APPROVED.value: CallStatus.PENDING,
    _L.AWAITING_APPROVAL.value: CallStatus.AWAITING_APPROVAL,
    _L.EXECUTED.value: CallStatus.COMPLETED,
    _L.CONFIRMED.value: CallStatus.COMPLETED,
    _L.FAILED.value: CallStatus.ERROR,
    _L.ABANDONED.value: CallStatus.ERROR,
    _L.DENIED.value: CallStatus.DENIED,
}

if set(EVENT_STATUS_OF) != set(LEDGER_STATUSES):  # pragma: no cover - a programming error
    raise AssertionError("EVENT_STATUS_OF must map every ledger status")
if typing.get_args(EventStatus) != EVENT_STATUSES:  # pragma: no cover - a programming error
    raise AssertionError("EventStatus and CallStatus list different statuses")
