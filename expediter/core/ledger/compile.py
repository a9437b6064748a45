"""Render the ledger's hot-path SQL from the SQLAlchemy tables, as ``statements.py`` keeps it.

The ledger runs its writes from text constants so that opening a ledger and recording calls
never imports SQLAlchemy (about 150-450 ms per ``expediter call`` process). This module is the
source of that text: ``python -m expediter.core.ledger.compile`` rewrites ``statements.py``,
and a test fails when the two differ. Only tests, the generator and ad-hoc reads import it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from expediter.core.ledger.database import Dialect
from expediter.core.ledger.tables import tool_call_attempts as t

__all__ = ["CHANNEL", "COLUMNS", "HOT_PATH", "compiler", "differences", "render", "source"]

#: The PostgreSQL channel a decided or finished paused call is announced on (its key).
CHANNEL = "expediter_calls"
#: The statements ``statements.py`` keeps, in order (the ``_notify`` ones exist on PostgreSQL).
HOT_PATH = (
    "insert",
    "insert_duplicate",
    "upsert",
    "finish",
    "finish_notify",
    "decide",
    "decide_notify",
    "renew",
    "confirm",
    "sweep",
    "expire_approvals",
    "get",
)
COLUMNS = tuple(column.name for column in t.columns)
#: Columns a new row leaves at their default (``duplicate_of`` is written for duplicates only).
_DEFAULTED = frozenset({"late", "duplicate_of"})
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
_STATEMENTS = Path(__file__).resolve().parent / "statements.py"


def compiler(dialect: Dialect) -> sa.engine.Dialect:
    """The SQLAlchemy dialect the ledger's SQL is compiled for: positional parameters, so the
    drivers bind tuples without mapping names on every call."""
    if dialect == "sqlite":
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


def _announced(update: Any, *, keys: bool = False) -> Any:
    """``update`` that also sends ``pg_notify(CHANNEL, key)`` for every row it changed, in the
    same statement (so the notice is delivered exactly when the change commits)."""
    changed = update.returning(t.c.key).cte("changed")
    notify = sa.func.pg_notify(_text(CHANNEL), changed.c.key)
    return sa.select(changed.c.key, notify) if keys else sa.select(notify)


def _statements(dialect: Dialect) -> dict[str, Any]:
    """The SQLAlchemy statements, by name."""
    pg = dialect == "postgresql"
    insert = (sqlite.insert if dialect == "sqlite" else postgresql.insert)(t)
    values: dict[str, Any] = {
        name: sa.bindparam(name) for name in COLUMNS if name not in _DEFAULTED
    }
    upsert = insert.values(**values)
    finish = (
        t.update()
        .where(_guard(attempt=True))
        .values(
            **{
                name: sa.bindparam(name)
                for name in ("status", "result", "error", "finished_at", "updated_at")
            },
            duration_ms=sa.bindparam("duration_ms"),
            lease_expires_at=sa.null(),
            late=sa.bindparam("late"),
        )
    )
    decide = (
        t.update()
        .where(_guard(attempt=False))
        .values(
            **{
                name: sa.bindparam(name)
                for name in (
                    "status",
                    "decision",
                    "decided_by",
                    "decision_reason",
                    "error",
                    "finished_at",
                    "updated_at",
                    "lease_expires_at",
                    "worker_id",
                    "attempt_id",
                )
            }
        )
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
    if pg:
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
    expire = (
        t.update()
        .where(t.c.status == _text("awaiting_approval"), t.c.updated_at < sa.bindparam("before"))
        .values(
            status=_text("abandoned"),
            updated_at=sa.bindparam("now"),
            finished_at=sa.bindparam("now"),
            error=_text("abandoned: nobody decided before the approval expired"),
        )
    )
    return {
        "insert": insert.values(**values).on_conflict_do_nothing(index_elements=[t.c.key]),
        # A duplicate execution found on replay, recorded as its own row (``KEY#dup-N``).
        "insert_duplicate": insert.values(
            **values, duplicate_of=sa.bindparam("duplicate_of")
        ).on_conflict_do_nothing(index_elements=[t.c.key]),
        "upsert": upsert.on_conflict_do_update(
            index_elements=[t.c.key],
            set_={
                **{name: getattr(upsert.excluded, name) for name in _FINISHED},
                # A result for a row the sweeper abandoned is late (SET sees the old status).
                "late": sa.case((t.c.status == _text("abandoned"), sa.true()), else_=t.c.late),
            },
            where=sa.and_(
                t.c.attempt_id == upsert.excluded.attempt_id,
                sa.or_(*(t.c.status == _text(s) for s in ("proposed", "approved", "abandoned"))),
            ),
        ),
        "finish": finish,
        # PostgreSQL announces what a waiter (``Ledger.wait``) may be waiting for: a paused
        # call decided, an approved call finished, a call swept. Ordinary calls never notify.
        "finish_notify": _announced(finish) if pg else finish,
        "decide": decide,
        "decide_notify": _announced(decide) if pg else decide,
        "renew": t.update()
        .where(_guard(attempt=True))
        .values(lease_expires_at=sa.bindparam("lease_expires_at")),
        "confirm": t.update()
        .where(t.c.message_id == sa.bindparam("message_id"), t.c.status == _text("executed"))
        .values(status=_text("confirmed"), updated_at=sa.bindparam("updated_at")),
        "sweep": _announced(sweep, keys=True) if pg else sweep.returning(t.c.key),
        "expire_approvals": _announced(expire, keys=True) if pg else expire.returning(t.c.key),
        "get": sa.select(t).where(t.c.key == sa.bindparam("key")),
    }


def render(dialect: Dialect) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each hot-path statement as (SQL text, names of its positional parameters in order)."""
    dialect_ = compiler(dialect)
    rendered = {}
    for name, statement in _statements(dialect).items():
        compiled = statement.compile(dialect=dialect_)
        leftover = {k: v for k, v in compiled.params.items() if v is not None}
        if leftover:  # pragma: no cover - a programming error in _statements
            raise AssertionError(f"{name} compiles values into its parameters: {leftover}")
        rendered[name] = (compiled.string, tuple(compiled.positiontup or ()))
    return {name: rendered[name] for name in HOT_PATH}


def _chunks(text: str, width: int = 80) -> list[str]:
    """``text`` cut after spaces into pieces of at most ``width`` characters (they join back to
    exactly ``text``)."""
    pieces, start = [], 0
    while len(text) - start > width:
        cut = text.rfind(" ", start, start + width)
        cut = start + width if cut <= start else cut + 1
        pieces.append(text[start:cut])
        start = cut
    return [*pieces, text[start:]]


def _entry(name: str, text: str, names: tuple[str, ...]) -> list[str]:
    """One ``name: (text, names)`` entry of the generated dict."""
    sql = [f"        {piece!r}" for piece in _chunks(text)]
    return [
        f"    {name!r}: (",
        *sql[:-1],
        sql[-1] + ",",
        "        (",
        *(f"            {piece.strip()}" for piece in _chunks(" ".join(f"{n!r}," for n in names))),
        "        ),",
        "    ),",
    ]


def source() -> str:
    """The text of ``statements.py`` for the current tables and migrations."""
    from expediter.core.ledger import schema

    lines = [
        '"""The ledger\'s hot-path SQL, as text: opening a ledger and recording calls imports no',
        "SQLAlchemy. Generated from tables.py by ``python -m expediter.core.ledger.compile``; do",
        "not edit (``tests/core/ledger/test_statements.py`` fails when it is out of date).",
        '"""',
        "",
        "# fmt: off",
        "",
        "#: The schema revision these statements were rendered for (the newest migration).",
        f"REVISION = {schema.heads()[0]!r}",
        "#: The PostgreSQL channel ``Ledger.wait`` listens on; the payload is a call's key.",
        f"CHANNEL = {CHANNEL!r}",
        "#: The columns of ``tool_call_attempts``, in table order.",
        "COLUMNS = (",
        *(f"    {piece.strip()}" for piece in _chunks(" ".join(f"{n!r}," for n in COLUMNS))),
        ")",
    ]
    dialects: tuple[Dialect, ...] = ("sqlite", "postgresql")
    for dialect in dialects:
        lines.append(f"#: {dialect}: statement name -> (SQL, positional parameter names).")
        lines.append(f"{dialect.upper()}: dict[str, tuple[str, tuple[str, ...]]] = {{")
        for name, (text, names) in render(dialect).items():
            lines += _entry(name, text, names)
        lines.append("}")
    return "\n".join(lines) + "\n"


def differences() -> list[str]:
    """How ``statements.py`` differs from what SQLAlchemy and the migrations give now (empty
    when it is up to date)."""
    from expediter.core.ledger import schema, statements

    found = []
    if schema.heads()[0] != statements.REVISION:
        found.append(f"REVISION is {statements.REVISION}, the newest migration {schema.heads()}")
    if statements.CHANNEL != CHANNEL:
        found.append(f"CHANNEL is {statements.CHANNEL!r}, not {CHANNEL!r}")
    if statements.COLUMNS != COLUMNS:
        found.append(f"COLUMNS are {statements.COLUMNS}, the table's {COLUMNS}")
    kept_by: dict[Dialect, dict[str, tuple[str, tuple[str, ...]]]] = {
        "sqlite": statements.SQLITE,
        "postgresql": statements.POSTGRESQL,
    }
    for dialect, kept in kept_by.items():
        for name, (text, names) in render(dialect).items():
            if kept.get(name) != (text, names):
                found.append(f"{dialect} {name}: {kept.get(name)!r} != {(text, names)!r}")
        extra = set(kept) - set(HOT_PATH)
        found += [f"{dialect} {name}: not a hot-path statement" for name in sorted(extra)]
    if found:
        found.append(f"{_STATEMENTS} is out of date: run python -m expediter.core.ledger.compile")
    return found


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``statements.py`` (``--check``: only say whether it is up to date)."""
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        stale = differences()
        for line in stale:
            print(line)
        return 1 if stale else 0
    text = source()
    if not _STATEMENTS.exists() or _STATEMENTS.read_text(encoding="utf-8") != text:
        _STATEMENTS.write_text(text, encoding="utf-8")
        print(f"wrote {_STATEMENTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
