"""Reading the ledger back: rows by key or filter, statistics, waiting for calls to end,
pending approvals and duplicates (``expediter ledger``, ``host.outcome``, ``host.wait``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from expediter.core.ledger.columns import column_text, stored_key
from expediter.core.ledger.records import LedgerRow, ToolStats
from expediter.core.ledger.waiting import FINAL_STATUSES, sleeper_for, wait_for
from expediter.errors import IdentifierError

if TYPE_CHECKING:
    from expediter.core.ledger.database import Database
    from expediter.core.ledger.repository import Repository

__all__ = ["CLIENT_SIDE", "LedgerReads"]

#: The ``decision`` of a call the application runs itself (waiting for its result).
CLIENT_SIDE = "client_side"
T = TypeVar("T")


class LedgerReads:
    """The ledger's reads (a base of ``Ledger``, which supplies the connection)."""

    database: Database
    _read: Callable[[Callable[[Repository], Any]], Any]

    def pending_approvals(self, *, limit: int = 0) -> list[LedgerRow]:
        """Calls waiting for a human's decision, oldest first (client-side calls excluded)."""
        from expediter.core.ledger import queries

        query, params = queries.pending_approvals(client_side=CLIENT_SIDE, limit=limit)
        found = self._read(lambda repository: repository.select(query, params))
        return [LedgerRow.from_db(row) for row in found]

    def get(self, key: str) -> LedgerRow | None:
        """The row of a key, or None."""
        stored = stored_key(key)
        row = self._read(lambda repository: repository.get(stored))
        return None if row is None else LedgerRow.from_db(row)

    def rows(
        self,
        *,
        status: str | None = None,
        user_id: str | None = None,
        tool: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[LedgerRow]:
        """Rows newest first, filtered; ``since`` is seconds ago; ``limit=0`` for all."""
        from expediter.core.ledger import queries

        if user_id is not None:
            # Identity is compared exactly: a filter no call's user id can equal is refused,
            # never turned into another user's (``stored_key`` would drop a NUL).
            user_id = IdentifierError.check(user_id)
        query, params = queries.rows(
            status=status,
            user_id=stored_key(user_id),
            tool=column_text(tool),
            since=since,
            limit=limit,
        )
        found = self._read(lambda repository: repository.select(query, params))
        return [LedgerRow.from_db(row) for row in found]

    def stats(self, *, since: float | None = None) -> list[ToolStats]:
        """Calls, failures and p50/p95 duration per tool."""
        from expediter.core.ledger import queries

        query, params = queries.stats(since=since)
        found = self._read(lambda repository: repository.select(query, params))
        return queries.tool_stats(found)

    def wait(self, keys: Iterable[str], timeout: float | None = None) -> dict[str, LedgerRow]:
        """Wait until every key's call is final (executed, confirmed, failed, denied or
        abandoned), or ``timeout`` seconds (None: no limit); the rows final by then, by key.

        Never raises for a timeout, and an unknown key just never becomes final. PostgreSQL
        wakes it with LISTEN on a connection of its own; on SQLite it polls.
        """

        def final(pending: list[str]) -> dict[str, LedgerRow]:
            found = self._read(lambda repository: repository.get_many(pending))
            return {
                key: LedgerRow.from_db(row)
                for key, row in found.items()
                if row["status"] in FINAL_STATUSES
            }

        # Waited for (and announced) by their stored forms; answered by the keys asked for.
        stored = {key: stored_key(key) for key in keys}
        rows = wait_for(
            list(dict.fromkeys(stored.values())),
            timeout,
            lambda: sleeper_for(self.database),
            final,
        )
        return {key: rows[form] for key, form in stored.items() if form in rows}

    def keys_with_prefix(
        self, prefix: str, limit: int = 10, *, status: str | None = None
    ) -> list[str]:
        """Up to ``limit`` keys that start with ``prefix`` (exactly, case included), sorted;
        with ``status``, only keys of calls in that ledger status."""
        from expediter.core.ledger import queries

        query, params = queries.keys_with_prefix(column_text(prefix) or "", limit, status)
        found = self._read(lambda repository: repository.select(query, params))
        return [str(row["key"]) for row in found]

    def duplicates(self, key: str) -> list[str]:
        """The keys of the duplicate executions of ``key`` (``KEY#dup-N``), oldest first: the
        same call run again while the ledger was unreachable, recorded on replay."""
        from expediter.core.ledger import queries

        query, params = queries.duplicates(stored_key(key))
        found = self._read(lambda repository: repository.select(query, params))
        return [str(row["key"]) for row in found]
