"""The ledger: every tool call recorded durably (``host.ledger``; ``expediter ledger``).

Importing this package imports SQLAlchemy; the host does so only when the ledger is first used.
"""

from __future__ import annotations

from expediter.core.ledger.database import Database, default_url
from expediter.core.ledger.ledger import Attempt, Ledger, parse_duration, redact
from expediter.core.ledger.records import LedgerRow, ToolStats
from expediter.core.ledger.tables import STATUSES

__all__ = [
    "STATUSES",
    "Attempt",
    "Database",
    "Ledger",
    "LedgerRow",
    "ToolStats",
    "default_url",
    "parse_duration",
    "redact",
]
