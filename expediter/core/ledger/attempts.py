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
    #: None: the database was unreachable and the write went to the spool.
    created: bool | None
    status: str = "proposed"
    #: False when neither the database nor the spool took the proposed row: the result is
    #: then recorded with ``upsert_executed`` (the whole row at once).
    recorded: bool = True
    row: dict[str, Any] = attrs.field(factory=dict, repr=False)


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
