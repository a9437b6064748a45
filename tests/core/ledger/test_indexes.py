"""Every index on ``tool_call_attempts`` earns its write cost: the reads that need it use it,
calls outside its partial predicate never write it, and both ways of building the schema (the
fast path and the alembic scripts) build the same indexes, predicates included."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from expediter.core.ledger import Ledger, schema
from expediter.core.ledger.database import Database
from expediter.core.ledger.queries import duplicates, pending_approvals, rows
from expediter.core.ledger.repository import Statements


def index_definitions(url: str) -> dict[str, str]:
    """Index name -> its full definition (columns and partial predicate), as the database
    reports it."""
    database = Database.parse(url)
    connection = database.connect()
    try:
        if database.dialect == "sqlite":
            found = connection.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                "AND tbl_name = 'tool_call_attempts' AND sql IS NOT NULL"
            ).fetchall()
        else:
            found = connection.execute(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE tablename = 'tool_call_attempts' AND indexname LIKE 'ix_%'"
            ).fetchall()
    finally:
        connection.close()
    return {str(name): " ".join(str(sql).split()) for name, sql in found}


def alembic(url: str, action: str, revision: str) -> None:
    engine = sa.create_engine(Database.parse(url).sqlalchemy_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as connection:
            getattr(command, action)(schema._config(connection), revision)
    finally:
        engine.dispose()


@pytest.fixture
def other_url(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> str:
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'other.db'}"
    return str(request.getfixturevalue("fresh_pg_url")())


def test_the_fast_path_and_the_scripts_build_the_same_index_definitions(
    database_url: str, other_url: str
) -> None:
    schema.upgrade(Database.parse(database_url))  # an empty database: the fast path
    alembic(other_url, "upgrade", "head")
    fast, scripted = index_definitions(database_url), index_definitions(other_url)
    assert fast == scripted
    assert "user_id IS NOT NULL" in fast["ix_tool_call_attempts_user"]
    assert ("ix_tool_call_attempts_lease" in fast) == database_url.startswith("postgresql")


def test_the_lean_indexes_migration_goes_down_and_up_again(migrated_url: str) -> None:
    at_head = index_definitions(migrated_url)
    alembic(migrated_url, "downgrade", "0002_call_request")
    before = index_definitions(migrated_url)
    assert "ix_tool_call_attempts_lease" in before
    assert "IS NOT NULL" not in before["ix_tool_call_attempts_user"]
    alembic(migrated_url, "upgrade", "head")
    assert index_definitions(migrated_url) == at_head


def test_the_duplicate_of_migration_goes_down_and_up_again(
    migrated_url: str, tmp_path: Path
) -> None:
    at_head = index_definitions(migrated_url)
    assert "duplicate_of IS NOT NULL" in at_head["ix_tool_call_attempts_duplicate"]
    ledger = Ledger(migrated_url, home=tmp_path / "home")
    try:
        ledger.finish(ledger.begin(key="m:c", call_id="c", user_id=None), ok=True, result=1)
    finally:
        ledger.close()
    alembic(migrated_url, "downgrade", "0003_lean_indexes")
    assert "ix_tool_call_attempts_duplicate" not in index_definitions(migrated_url)
    alembic(migrated_url, "upgrade", "head")
    assert index_definitions(migrated_url) == at_head
    ledger = Ledger(migrated_url, home=tmp_path / "home")
    try:
        row = ledger.get("m:c")
        assert row is not None
        assert (row.status, row.result, row.duplicate_of) == ("executed", 1, None)
    finally:
        ledger.close()


# -- which read uses which index (SQLite's query plans) --------------------------------------


@pytest.fixture
def lite(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path / 'plans.db'}"
    schema.upgrade(Database.parse(url))
    connection = Database.parse(url).connect()
    yield connection
    connection.close()


def plan(connection: sqlite3.Connection, query: Any, params: dict[str, Any]) -> str:
    sql = Statements("sqlite").render(query)
    found = connection.execute("EXPLAIN QUERY PLAN " + sql.text, sql.values(params)).fetchall()
    return " | ".join(str(row[-1]) for row in found)


@pytest.mark.parametrize(
    ("read", "index"),
    [
        (rows(), "ix_tool_call_attempts_attempted"),
        (rows(since=3600), "ix_tool_call_attempts_attempted"),
        (rows(user_id="ann"), "ix_tool_call_attempts_user"),
        (pending_approvals(client_side="client_side"), "ix_tool_call_attempts_waiting"),
        (duplicates("m:c"), "ix_tool_call_attempts_duplicate"),
    ],
    ids=["ls", "ls --since", "ls --user", "approvals ls", "show's duplicates"],
)
def test_each_operator_read_uses_its_index(lite: Any, read: Any, index: str) -> None:
    assert index in plan(lite, *read)


def test_confirm_and_the_approval_expiry_use_their_indexes(lite: Any) -> None:
    for name, index in (
        ("confirm", "ix_tool_call_attempts_message"),
        ("expire_approvals", "ix_tool_call_attempts_waiting"),
    ):
        sql = getattr(Statements("sqlite"), name)
        found = lite.execute("EXPLAIN QUERY PLAN " + sql.text, [None] * len(sql.names))
        assert index in " | ".join(str(row[-1]) for row in found.fetchall()), name


# -- what an ordinary call writes ------------------------------------------------------------


def wal_pages_per_call(tmp_path: Path, user: str | None, message: str | None) -> float:
    """WAL pages an SQLite ledger writes per recorded call (begin + finish), checkpoints off."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'pages.db'}", home=tmp_path / "home")
    try:
        ledger.check()
        connection = ledger._connect().connection
        connection.execute("PRAGMA wal_autocheckpoint=0")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        calls = 300
        for n in range(calls):
            attempt = ledger.begin(
                key=f"run:{n:06d}", call_id=str(n), user_id=user, message_id=message, tool="t"
            )
            ledger.finish(attempt, ok=True, result=n, duration_ms=0.1)
        size = (tmp_path / "pages.db-wal").stat().st_size
        page = int(connection.execute("PRAGMA page_size").fetchone()[0])
    finally:
        ledger.close()
    return (size - 32) / (page + 24) / calls


def test_a_direct_call_without_a_user_writes_only_the_table_its_key_and_the_time_index(
    tmp_path: Path,
) -> None:
    # Two commits: the row's page and its key's page, then the row's page again; plus the
    # time index (ledger ls). No lease, user or message index page (~3.2 without any index).
    assert wal_pages_per_call(tmp_path, user=None, message=None) < 4.6


def test_a_call_with_a_user_also_writes_the_user_index(tmp_path: Path) -> None:
    assert 4.6 < wal_pages_per_call(tmp_path, user="ann", message=None) < 5.6


def test_an_sqlite_sweep_without_a_lease_index_still_finds_expired_calls(
    tmp_path: Path,
) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'sweep.db'}", home=tmp_path / "home")
    other = Ledger(f"sqlite:///{tmp_path / 'sweep.db'}", home=tmp_path / "home2", lease_seconds=0.0)
    try:
        kept = ledger.begin(key="s:kept", call_id="k", user_id=None)
        other.begin(key="s:dead", call_id="d", user_id=None)
        done = other.begin(key="s:done", call_id="x", user_id=None)
        other.finish(done, ok=True, result=1)
        assert ledger.sweep() == ["s:dead"]
        assert ledger.finish(kept, ok=True, result=2) is True
    finally:
        other.close()
        ledger.close()
