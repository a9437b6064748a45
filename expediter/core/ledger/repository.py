"""Guarded transitions on ``tool_call_attempts``, as SQL compiled once per dialect.

Creating a row is ``INSERT ... ON CONFLICT DO NOTHING`` and reports whether this caller created
it. Every later write is ``UPDATE ... WHERE key = ? AND status = <expected> AND user_id IS NOT
DISTINCT FROM ?`` (SQLite: ``IS``), and writes that finish or renew an attempt also require the
caller's ``attempt_id``: a caller that did not create (or claim) a row never updates it. Each
method reports whether it applied.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, final

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from expediter.core.ledger.database import Dialect
from expediter.core.ledger.tables import tool_call_attempts as t
from expediter.errors import LedgerError

__all__ = ["ALLOWED", "COLUMNS", "Repository", "Statements"]

#: The transitions the ledger allows: ``from -> {to}``.
ALLOWED: dict[str, frozenset[str]] = {
    "proposed": frozenset({"executed", "failed", "awaiting_approval", "denied", "abandoned"}),
    "awaiting_approval": frozenset({"approved", "denied", "abandoned"}),
    "approved": frozenset({"executed", "failed", "abandoned"}),
    "executed": frozenset({"confirmed"}),
    "abandoned": frozenset({"executed", "failed"}),  # a late result is still recorded
    "failed": frozenset(),
    "denied": frozenset(),
    "confirmed": frozenset(),
}
COLUMNS = tuple(column.name for column in t.columns)
#: Names of the bind parameters the statements below declare themselves.
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
_RUNNING = ("proposed", "approved")
_FINISHED = (
    "status",
    "result",
    "error",
    "finished_at",
    "updated_at",
    "duration_ms",
    "lease_expires_at",
)


def _dialect(name: Dialect) -> sa.engine.Dialect:
    # Positional parameters: the drivers bind tuples without mapping names each time.
    if name == "sqlite":
        return sqlite.dialect(paramstyle="qmark")
    return postgresql.psycopg.dialect(paramstyle="format")  # type: ignore[no-untyped-call]


def _text(value: str) -> Any:
    """A constant string rendered into the SQL (so only the call's own values are bound)."""
    return sa.literal_column("'" + value.replace("'", "''") + "'", sa.String)


def _guard(*, attempt: bool) -> Any:
    condition = sa.and_(
        t.c.key == sa.bindparam("g_key"),
        t.c.status == sa.bindparam("g_status"),
        t.c.user_id.is_not_distinct_from(sa.bindparam("g_user")),
    )
    if attempt:
        condition = sa.and_(condition, t.c.attempt_id == sa.bindparam("g_attempt"))
    return condition


@attrs.frozen
class Sql:
    """A compiled statement: text, the parameter names in position order, fixed values."""

    text: str
    names: tuple[str, ...]
    #: Values compiled into bind parameters that the caller does not supply (reads' limits).
    constants: Mapping[str, Any]
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
    """The ledger's SQL for one dialect, compiled once."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        compiler = _dialect(dialect)
        insert = (sqlite.insert if dialect == "sqlite" else postgresql.insert)(t)
        values: dict[str, Any] = {name: sa.bindparam(name) for name in COLUMNS if name != "late"}
        self.insert = self._compile(
            insert.values(**values).on_conflict_do_nothing(index_elements=[t.c.key]), compiler
        )
        upsert = insert.values(**values)
        self.upsert = self._compile(
            upsert.on_conflict_do_update(
                index_elements=[t.c.key],
                set_={
                    **{name: getattr(upsert.excluded, name) for name in _FINISHED},
                    # A result for a row the sweeper abandoned is late (SET sees the old status).
                    "late": sa.case((t.c.status == _text("abandoned"), sa.true()), else_=t.c.late),
                },
                where=sa.and_(
                    t.c.attempt_id == upsert.excluded.attempt_id,
                    sa.or_(
                        *(t.c.status == _text(s) for s in ("proposed", "approved", "abandoned"))
                    ),
                ),
            ),
            compiler,
        )
        finish_values: dict[str, Any] = {
            name: sa.bindparam(name)
            for name in ("status", "result", "error", "finished_at", "updated_at", "duration_ms")
        }
        self.finish = self._compile(
            t.update()
            .where(_guard(attempt=True))
            .values(**finish_values, lease_expires_at=sa.null(), late=sa.bindparam("late")),
            compiler,
        )
        self.decide = self._compile(
            t.update()
            .where(_guard(attempt=False))
            .values(
                status=sa.bindparam("status"),
                decision=sa.bindparam("decision"),
                decided_by=sa.bindparam("decided_by"),
                decision_reason=sa.bindparam("decision_reason"),
                error=sa.bindparam("error"),
                finished_at=sa.bindparam("finished_at"),
                updated_at=sa.bindparam("updated_at"),
                lease_expires_at=sa.bindparam("lease_expires_at"),
                worker_id=sa.bindparam("worker_id"),
                attempt_id=sa.bindparam("attempt_id"),
            ),
            compiler,
        )
        self.renew = self._compile(
            t.update()
            .where(_guard(attempt=True))
            .values(lease_expires_at=sa.bindparam("lease_expires_at")),
            compiler,
        )
        self.confirm = self._compile(
            t.update()
            .where(t.c.message_id == sa.bindparam("message_id"), t.c.status == _text("executed"))
            .values(status=_text("confirmed"), updated_at=sa.bindparam("updated_at")),
            compiler,
        )
        expired = sa.and_(
            sa.or_(*(t.c.status == _text(status) for status in _RUNNING)),
            t.c.lease_expires_at < sa.bindparam("now"),
        )
        sweep = t.update().values(
            status=_text("abandoned"),
            updated_at=sa.bindparam("now"),
            finished_at=sa.bindparam("now"),
            error=_text("abandoned: the worker stopped renewing its lease"),
        )
        if dialect == "postgresql":
            # Several sweepers (or workers) at once: each row is taken by one, none waits.
            locked = (
                sa.select(t.c.key)
                .where(expired)
                .limit(sa.bindparam("batch"))
                .with_for_update(skip_locked=True)
                .scalar_subquery()
            )
            sweep = sweep.where(t.c.key.in_(locked))
        else:
            sweep = sweep.where(expired)
        self.sweep = self._compile(sweep.returning(t.c.key), compiler)
        self.expire_approvals = self._compile(
            t.update()
            .where(
                t.c.status == _text("awaiting_approval"), t.c.updated_at < sa.bindparam("before")
            )
            .values(
                status=_text("abandoned"),
                updated_at=sa.bindparam("now"),
                finished_at=sa.bindparam("now"),
                error=_text("abandoned: nobody decided before the approval expired"),
            )
            .returning(t.c.key),
            compiler,
        )
        self.get = self._compile(sa.select(t).where(t.c.key == sa.bindparam("key")), compiler)
        self.compiler = compiler

    @staticmethod
    def _compile(statement: Any, compiler: sa.engine.Dialect) -> Sql:
        """The SQL text and how to pick its positional values out of a parameter dict."""
        compiled = statement.compile(dialect=compiler)
        names = tuple(compiled.positiontup or ())
        constants = {k: v for k, v in compiled.params.items() if k not in _OURS and v is not None}
        return Sql(compiled.string, names, constants)

    def render(self, statement: Any) -> Sql:
        """Compile an ad-hoc statement (reads) for this dialect."""
        return self._compile(statement, self.compiler)


@final
class Repository:
    """The ledger's statements on one DBAPI connection (autocommit)."""

    def __init__(self, connection: Any, statements: Statements) -> None:
        self.connection = connection
        self.statements = statements
        # One cursor for every statement: psycopg makes a new one per connection.execute().
        self._cursor = connection.cursor()

    def _execute(self, statement: Sql, params: Mapping[str, Any]) -> Any:
        self._cursor.execute(statement.text, statement.values(params))
        return self._cursor

    def insert(self, row: Mapping[str, Any]) -> bool:
        """Create a row in its first status; False when the key exists (nothing changed)."""
        return bool(self._execute(self.statements.insert, row).rowcount == 1)

    def upsert_executed(self, row: Mapping[str, Any]) -> bool:
        """Record a finished attempt whose first write was lost: insert it, or finish the row
        this same attempt created. Never touches another attempt's row."""
        return bool(self._execute(self.statements.upsert, row).rowcount == 1)

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
        _check(expected, status, _FINISHES)
        if late is None:
            late = expected == "abandoned"
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
        return bool(self._execute(self.statements.finish, params).rowcount == 1)

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
        return bool(self._execute(self.statements.decide, params).rowcount == 1)

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
        return bool(self._execute(self.statements.renew, params).rowcount == 1)

    def confirm(self, message_id: str, now: float) -> int:
        """Move a message's executed rows to ``confirmed``; returns how many."""
        cursor = self._execute(
            self.statements.confirm, {"message_id": message_id, "updated_at": now}
        )
        return int(cursor.rowcount)

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

    def select(self, statement: Any, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run an ad-hoc read compiled for this dialect."""
        cursor = self._execute(self.statements.render(statement), params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


_FINISHES = frozenset({"executed", "failed"})
_DECISIONS = frozenset({"awaiting_approval", "approved", "denied"})


def _check(expected: str, status: str, targets: frozenset[str]) -> None:
    if status not in targets:
        raise LedgerError(f"this write cannot move a call to {status!r}")
    if status not in ALLOWED.get(expected, frozenset()):
        raise LedgerError(f"the ledger does not allow {expected} -> {status}")
