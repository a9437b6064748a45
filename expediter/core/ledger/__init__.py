"""The ledger: every tool call recorded durably (``host.ledger``; ``expediter ledger``).

Opening a ledger and recording calls imports neither SQLAlchemy nor alembic (the hot path's
SQL is kept as text in ``statements.py``); the operators' reads and migrations import them.
"""

from __future__ import annotations

from expediter.core.ledger.database import Database, default_url
from expediter.core.ledger.ledger import Attempt, Ledger, Proposal, parse_duration, redact
from expediter.core.ledger.records import DeadLetter, LedgerRow, ToolStats
from expediter.core.records.statuses import LEDGER_STATUSES as STATUSES

__all__ = [
    "STATUSES",
    "Attempt",
    "Database",
    "DeadLetter",
    "Ledger",
    "LedgerRow",
    "Proposal",
    "ToolStats",
    "default_url",
    "parse_duration",
    "redact",
]
