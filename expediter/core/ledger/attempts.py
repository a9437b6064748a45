"""A call being recorded (``Attempt``), and a call to record (``Proposal``)."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["Attempt", "Proposal"]


@attrs.define
class Attempt:
    """One call being recorded: the row it created, and whether the database has it yet."""

    key: str
    user_id: str | None
    attempt_id: str
    started: float
    #: True: this attempt created the row; False: the key existed (do not run);
    #: None: the database was unreachable and the write went to the spool. ``key`` is the
    #: key's stored form, and becomes ``KEY#dup-N`` if a replay records this attempt as a
    #: duplicate execution.
    created: bool | None
    status: str = "proposed"
    #: Whether the database or the spool took the proposed row: always, since ``begin``
    #: raises LedgerError (and the call does not run) when neither does.
    recorded: bool = True


@attrs.frozen(kw_only=True)
class Proposal:
    """One call for ``Ledger.begin_many``: what ``Ledger.begin`` takes for a single call."""

    key: str
    call_id: str
    user_id: str | None
    name: str | None = None
    run_id: str | None = None
    message_id: str | None = None
    owner_id: str | None = None
    instance_id: str | None = None
    tool: str | None = None
    action: str | None = None
    #: Recorded redacted of secret-looking names, as JSON.
    arguments: Any = None
    #: What a paused call needs to resume in another process.
    request: Any = None
    #: Whether the call is about to run (its row gets a lease the ledger renews).
    lease: bool = True
    decision: str | None = None
    reason: str | None = None
    #: The owner of the instance when it is not the invoker (a delegation).
    delegated_from: str | None = None
