"""Guarded transitions on ``tool_call_attempts``, as SQL text kept per dialect.

Creating a row is ``INSERT ... ON CONFLICT DO NOTHING`` and reports whether this caller created
it. Every later write is ``UPDATE ... WHERE key = ? AND status = <expected> AND user_id IS NOT
DISTINCT FROM ?`` (SQLite: ``IS``), and writes that finish or renew an attempt also require the
caller's ``attempt_id``: a caller that did not create (or claim) a row never updates it. Each
method reports whether it applied.

The hot path's SQL is text rendered from ``tables.py`` ahead of time (``statements.py``), so
recording calls imports no SQLAlchemy; only ad-hoc reads (``Statements.render``) compile.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, final

import attrs

from expediter.core.ledger import statements as kept
from expediter.core.ledger.database import Dialect
from expediter.core.records.statuses import ALLOWED
from expediter.errors import LedgerError

__all__ = ["ALLOWED", "COLUMNS", "FINISH_ORDER", "INSERT_ORDER", "Repository", "Sql", "Statements"]

#: The columns of ``tool_call_attempts``, in table order.
COLUMNS: tuple[str, ...] = kept.COLUMNS
#: The values ``Repository.propose`` takes, in order: every column but ``late`` and
#: ``duplicate_of`` (left at their defaults by a new call).
INSERT_ORDER: tuple[str, ...] = tuple(
    name for name in COLUMNS if name not in ("late", "duplicate_of")
)
#: The values ``Repository.finish_values`` takes, in order (``g_*`` are the guard's).
FINISH_ORDER = (
    "status",
    "result",
    "error",
    "updated_at",
    "finished_at",
    "duration_ms",
    "late",
    "g_key",
    "g_status",
    "g_user",
    "g_attempt",
)
#: Names of the bind parameters the ledger's statements declare themselves (``render`` keeps
#: any other compiled value, e.g. a literal LIMIT, as a constant).
_OURS = frozenset(COLUMNS) | {
    "g_key",
    "g_status",
    "g_user",
    "g_attempt",
    "now",
    "before",
    "batch",
    "message_id",
}


@attrs.frozen
class Sql:
    """A compiled statement: text, the parameter names in position order, fixed values."""

    text: str
    names: tuple[str, ...]
    #: Values compiled into bind parameters that the caller does not supply (reads' limits).
    constants: Mapping[str, Any] = attrs.field(factory=dict)
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]] = attrs.field(init=False)

    @pick.default
    def _picker(self) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
        if not self.names:
            return lambda params: ()
        if len(self.names) == 1:
            name = self.names[0]
            return lambda params: (params[name],)
        return operator.itemgetter(*self.names)

    def values(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional values for ``params`` (missing names are None)."""
        if self.constants:
            params = {**self.constants, **params}
        try:
            return self.pick(params)
        except KeyError:
            return tuple(params.get(name) for name in self.names)


@final
class Statements:
    """The ledger's SQL for one dialect: the hot path as kept text (``statements.py``), and
    ad-hoc reads compiled by SQLAlchemy on demand."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        found = kept.SQLITE if dialect == "sqlite" else kept.POSTGRESQL

        def sql(name: str) -> Sql:
            text, names = found[name]
            return Sql(text, names)

        self.insert = sql("insert")
        #: ``insert`` of a duplicate execution's own row, ``duplicate_of`` included.
        self.insert_duplicate = sql("insert_duplicate")
        self.upsert = sql("upsert")
        self.finish = sql("finish")
        #: ``finish`` that also announces the key (PostgreSQL NOTIFY): approved calls only.
        self.finish_notify = sql("finish_notify")
        self.decide = sql("decide")
        #: ``decide`` that also announces the key: decisions on paused calls only.
        self.decide_notify = sql("decide_notify")
        self.renew = sql("renew")
        self.confirm = sql("confirm")
        self.sweep = sql("sweep")
        self.expire_approvals = sql("expire_approvals")
        self.get = sql("get")
        # The per-call paths bind tuples in these orders (Repository.propose, .finish_values).
        for statement, order in ((self.insert, INSERT_ORDER), (self.finish, FINISH_ORDER)):
            if statement.names != order:  # pragma: no cover - caught by test_statements.py
                raise LedgerError(
                    "expediter/core/ledger/statements.py is out of date: run "
                    "python -m expediter.core.ledger.compile"
                )

    def render(self, statement: Any) -> Sql:
        """Compile an ad-hoc SQLAlchemy statement (reads) for this dialect."""
        from expediter.core.ledger.compile import compiler

        compiled = statement.compile(dialect=compiler(self.dialect))
        names = tuple(compiled.positiontup or ())
        constants = {k: v for k, v in compiled.params.items() if k not in _OURS and v is not None}
        return Sql(compiled.string, names, constants)


@final
class Repository:
    """The ledger's statements on one DBAPI connection (autocommit)."""

    def __init__(self, connection: Any, statements: Statements) -> None:
        self.connection = connection
        self.statements = statements
        # One cursor for every statement: psycopg makes a new one per connection.execute().
        self._cursor = connection.cursor()
        self._sqlite = statements.dialect == "sqlite"
        # Writes on PostgreSQL run as prepared statements through libpq (see prepared.py).
        self._writer: Any = self._cursor
        if not self._sqlite:
            from expediter.core.ledger.prepared import PreparedWriter

            self._writer = PreparedWriter(connection)

    def _execute(self, statement: Sql, params: Mapping[str, Any]) -> Any:
        self._cursor.execute(statement.text, statement.values(params))
        return self._cursor

    def _write(self, statement: Sql, params: Mapping[str, Any]) -> int:
        """Run a write; how many rows it changed."""
        try:
            values = statement.pick(params)
        except KeyError:
            values = statement.values(params)
        return int(self._writer.execute(statement.text, values).rowcount)

    def insert(self, row: Mapping[str, Any]) -> bool:
        """Create a row in its first status; False when the key exists (nothing changed)."""
        return self._write(self.statements.insert, row) == 1

    def insert_duplicate(self, row: Mapping[str, Any]) -> bool:
        """``insert`` of a duplicate execution's row (``row`` names ``duplicate_of``)."""
        return self._write(self.statements.insert_duplicate, row) == 1

    def propose(self, values: Sequence[Any]) -> bool:
        """``insert`` of a row given as values in ``INSERT_ORDER`` (the per-call path)."""
        return bool(self._writer.execute(self.statements.insert.text, values).rowcount == 1)

    def finish_values(self, values: Sequence[Any], *, announce: bool) -> bool:
        """``finish`` with values in ``FINISH_ORDER``, the move already known to be allowed (the
        per-call path); ``announce`` for an approved call (see ``finish``)."""
        statements = self.statements
        text = statements.finish_notify.text if announce else statements.finish.text
        return bool(self._writer.execute(text, values).rowcount == 1)

    def insert_many(self, rows: Sequence[Mapping[str, Any]]) -> list[bool]:
        """Create several rows in one transaction (one commit); for each, whether it was
        created (False: the key existed and nothing changed)."""
        insert = self.statements.insert
        with self._transaction():
            return [self._write(insert, row) == 1 for row in rows]

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction on the autocommit connection (SQLite takes the write lock first)."""
        self._command("BEGIN IMMEDIATE" if self._sqlite else "BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):  # a failed connection: the caller sees why
                self._command("ROLLBACK")
            raise
        self._command("COMMIT")

    def _command(self, text: str) -> None:
        if self._sqlite:
            self._cursor.execute(text)
        else:
            self._writer.command(text.encode())

    def upsert_executed(self, row: Mapping[str, Any]) -> bool:
        """Record a finished attempt whose first write was lost: insert it, or finish the row
        this same attempt created. Never touches another attempt's row."""
        return self._write(self.statements.upsert, row) == 1

    def finish(
        self,
        key: str,
        user_id: str | None,
        attempt_id: str,
        *,
        expected: str,
        status: str,
        result: Any,
        error: str | None,
        finished_at: float,
        duration_ms: float | None,
        late: bool | None = None,
    ) -> bool:
        """Move a running attempt (``expected``: proposed, approved, or abandoned for a late
        result, which marks it ``late``) to ``executed`` or ``failed``."""
        if (expected, status) not in _FINISH_MOVES:
            _check(expected, status, _FINISHES)
        if late is None:
            late = expected == "abandoned" or expected == "failed"
        params = {
            "g_key": key,
            "g_status": expected,
            "g_user": user_id,
            "g_attempt": attempt_id,
            "status": status,
            "result": result,
            "error": error,
            "finished_at": finished_at,
            "updated_at": finished_at,
            "duration_ms": duration_ms,
            "late": late,
        }
        # Someone may wait for an approved call (Ledger.wait): announce it; ordinary calls not.
        statements = self.statements
        statement = statements.finish_notify if expected == "approved" else statements.finish
        return self._write(statement, params) == 1

    def decide(
        self,
        key: str,
        user_id: str | None,
        *,
        expected: str,
        status: str,
        decision: str | None,
        decided_by: str | None,
        now: float,
        error: str | None = None,
        decision_reason: str | None = None,
        lease_expires_at: float | None = None,
        worker_id: str | None = None,
        attempt_id: str | None = None,
    ) -> bool:
        """Record a decision: ``awaiting_approval``, ``approved`` (claimed by ``attempt_id``)
        or ``denied``."""
        _check(expected, status, _DECISIONS)
        finished = now if status == "denied" else None
        params = {
            "g_key": key,
            "g_status": expected,
            "g_user": user_id,
            "status": status,
            "decision": decision,
            "decided_by": decided_by,
            "decision_reason": decision_reason,
            "error": error,
            "finished_at": finished,
            "updated_at": now,
            "lease_expires_at": lease_expires_at,
            "worker_id": worker_id,
            "attempt_id": attempt_id,
        }
        paused = expected == "awaiting_approval"
        statement = self.statements.decide_notify if paused else self.statements.decide
        return self._write(statement, params) == 1

    def renew(
        self, key: str, user_id: str | None, attempt_id: str, expected: str, until: float
    ) -> bool:
        """Extend a running attempt's lease (``expected``: proposed or approved)."""
        params = {
            "g_key": key,
            "g_status": expected,
            "g_user": user_id,
            "g_attempt": attempt_id,
            "lease_expires_at": until,
        }
        return self._write(self.statements.renew, params) == 1

    def confirm(self, message_id: str, now: float) -> int:
        """Move a message's executed rows to ``confirmed``; returns how many."""
        return self._write(self.statements.confirm, {"message_id": message_id, "updated_at": now})

    def sweep(self, now: float, batch: int = 1000) -> list[str]:
        """Abandon running rows whose lease expired; returns their keys."""
        cursor = self._execute(self.statements.sweep, {"now": now, "batch": batch})
        return [row[0] for row in cursor.fetchall()]

    def expire_approvals(self, before: float, now: float) -> list[str]:
        """Abandon approvals requested before ``before``; returns their keys."""
        cursor = self._execute(self.statements.expire_approvals, {"before": before, "now": now})
        return [row[0] for row in cursor.fetchall()]

    def get(self, key: str) -> dict[str, Any] | None:
        """The row of a key, as a column -> value dict, or None."""
        cursor = self._execute(self.statements.get, {"key": key})
        row = cursor.fetchone()
        if row is None:
            return None
        return dict(zip([d[0] for d in cursor.description], row, strict=True))

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The rows of the keys that exist, by key."""
        found = {}
        for key in keys:
            row = self.get(key)
            if row is not None:
                found[key] = row
        return found

    def select(self, statement: Any, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run an ad-hoc read compiled for this dialect."""
        cursor = self._execute(self.statements.render(statement), params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


_FINISHES = frozenset({"executed", "failed"})
_DECISIONS = frozenset({"awaiting_approval", "approved", "denied"})
#: The (expected, status) pairs ``finish`` may write, looked up once per call.
_FINISH_MOVES = frozenset(
    (expected, status) for expected, targets in ALLOWED.items() for status in targets & _FINISHES
)


def _check(expected: str, status: str, targets: frozenset[str]) -> None:
    if status not in targets:
        raise LedgerError(f"this write cannot move a call to {status!r}")
    if status not in ALLOWED.get(expected, frozenset()):
        raise LedgerError(f"the ledger does not allow {expected} -> {status}")
