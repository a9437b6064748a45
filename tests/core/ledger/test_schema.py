"""The ledger's schema: the bundled migrations, the fast path for a new database, and what
happens when a database is behind."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory

import expediter
from expediter.core.host import Host
from expediter.core.ledger import Ledger, schema
from expediter.core.ledger.database import Database
from expediter.errors import LedgerError


@pytest.fixture
def other_url(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> str:
    """A second empty database of the same kind as ``database_url``."""
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'other.db'}"
    return request.getfixturevalue("fresh_pg_url")()


def engine_for(url: str) -> sa.Engine:
    return sa.create_engine(Database.parse(url).sqlalchemy_url, poolclass=sa.pool.NullPool)


def migrate_with_alembic(url: str, revision: str = "head") -> None:
    """Run the bundled alembic scripts themselves (no fast path)."""
    engine = engine_for(url)
    try:
        with engine.begin() as connection:
            command.upgrade(schema._config(connection), revision)
    finally:
        engine.dispose()


def downgrade_with_alembic(url: str, revision: str = "base") -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as connection:
            command.downgrade(schema._config(connection), revision)
    finally:
        engine.dispose()


def describe(url: str) -> dict[str, dict[str, Any]]:
    """Tables, columns (name, type, nullability, default), keys, indexes and constraints."""
    engine = engine_for(url)
    try:
        inspector = sa.inspect(engine)
        return {
            table: {
                "columns": [
                    (column["name"], str(column["type"]), column["nullable"], column["default"])
                    for column in inspector.get_columns(table)
                ],
                "primary_key": inspector.get_pk_constraint(table),
                "indexes": sorted(
                    (index["name"], tuple(index["column_names"]), bool(index["unique"]))
                    for index in inspector.get_indexes(table)
                ),
                "unique": sorted(
                    (unique["name"], tuple(unique["column_names"]))
                    for unique in inspector.get_unique_constraints(table)
                ),
                "checks": sorted(
                    (check["name"], check["sqltext"])
                    for check in inspector.get_check_constraints(table)
                ),
                "foreign_keys": inspector.get_foreign_keys(table),
            }
            for table in sorted(inspector.get_table_names())
        }
    finally:
        engine.dispose()


def revision_of(url: str) -> str | None:
    connection = Database.parse(url).connect()
    try:
        return schema.current_revision(connection)
    finally:
        connection.close()


def execute(url: str, sql: str) -> None:
    connection = Database.parse(url).connect()
    try:
        connection.execute(sql)
    finally:
        connection.close()


# -- the bundled migrations -------------------------------------------------------------------


def test_head_is_the_newest_bundled_migration() -> None:
    assert schema.heads() == [schema.HEAD]
    assert len(schema.HEAD) <= 32  # alembic_version.version_num is VARCHAR(32)


def test_the_hot_path_head_constant_equals_alembics_head() -> None:
    scripts = ScriptDirectory.from_config(schema._config(None))
    assert schema.HEAD == scripts.get_current_head() == schema.script_head()


def test_the_fast_path_stamps_the_new_database_through_alembic(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamped: list[str] = []
    stamp = command.stamp

    def spy(config: Any, revision: str, *args: Any, **kwargs: Any) -> None:
        stamped.append(revision)
        stamp(config, revision, *args, **kwargs)

    monkeypatch.setattr(command, "stamp", spy)
    monkeypatch.setattr(command, "upgrade", _refuse_alembic)
    assert schema.upgrade(Database.parse(database_url)) == schema.HEAD
    assert stamped == [schema.HEAD]
    assert revision_of(database_url) == schema.HEAD


def test_opening_a_ledger_at_head_does_not_import_alembic(
    migrated_url: str, tmp_path: Path
) -> None:
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from expediter.core.ledger import Ledger\n"
        f"ledger = Ledger({migrated_url!r}, home=Path({str(tmp_path / 'home')!r}))\n"
        "ledger.open()\n"
        "ledger.close()\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'alembic'))"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.fixture
def both_paths(database_url: str, other_url: str) -> tuple[str, str]:
    """The same kind of database built by the fast path (``upgrade`` on an empty database,
    with the alembic scripts made to fail) and by the alembic scripts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(command, "upgrade", _refuse_alembic)
        assert schema.upgrade(Database.parse(database_url)) == schema.HEAD
    migrate_with_alembic(other_url)
    return database_url, other_url


def _refuse_alembic(*args: object, **kwargs: object) -> None:
    raise AssertionError("upgrade() ran the alembic scripts instead of the fast path")


def test_the_fast_path_builds_the_same_ledger_table_as_the_migrations(
    both_paths: tuple[str, str],
) -> None:
    fast, migrated = (describe(url) for url in both_paths)
    assert (
        set(fast)
        == set(migrated)
        == {
            "alembic_version",
            "tool_call_attempts",
            "tool_instances",
            "instance_settings",
            "tool_records",
            "oauth_tokens",
        }
    )
    for name in (
        "tool_call_attempts",
        "tool_instances",
        "instance_settings",
        "tool_records",
        "oauth_tokens",
    ):
        assert fast[name] == migrated[name], name
    table = fast["tool_call_attempts"]
    assert [name for name, *_ in table["columns"]][:3] == ["key", "call_id", "name"]
    # SQLite keeps no lease index (see tables.py; tests/core/ledger/test_indexes.py).
    lease = set() if both_paths[0].startswith("sqlite") else {"ix_tool_call_attempts_lease"}
    assert {name for name, *_ in table["indexes"]} == lease | {
        "ix_tool_call_attempts_message",
        "ix_tool_call_attempts_user",
        "ix_tool_call_attempts_attempted",
        "ix_tool_call_attempts_waiting",
        "ix_tool_call_attempts_duplicate",
    }
    assert [name for name, _ in table["checks"]] == ["ck_tool_call_attempts_status"]
    assert table["primary_key"]["constrained_columns"] == ["key"]
    assert [revision_of(url) for url in both_paths] == [schema.HEAD, schema.HEAD]


def test_the_fast_path_builds_the_same_alembic_version_table_as_the_migrations(
    both_paths: tuple[str, str],
) -> None:
    fast, migrated = (describe(url) for url in both_paths)
    assert fast["alembic_version"] == migrated["alembic_version"]


def test_upgrading_a_database_at_head_changes_nothing(both_paths: tuple[str, str]) -> None:
    before = [describe(url) for url in both_paths]
    for url in both_paths:
        assert schema.upgrade(Database.parse(url)) == schema.HEAD
    assert [describe(url) for url in both_paths] == before


def test_a_database_downgraded_to_base_is_upgraded_again_by_the_scripts(
    migrated_url: str,
) -> None:
    downgrade_with_alembic(migrated_url)
    assert "tool_call_attempts" not in describe(migrated_url)
    assert revision_of(migrated_url) is None
    assert schema.upgrade(Database.parse(migrated_url)) == schema.HEAD
    assert "tool_call_attempts" in describe(migrated_url)


def test_current_revision_is_none_for_an_empty_database_and_head_after_upgrade(
    database_url: str,
) -> None:
    connection = Database.parse(database_url).connect()
    try:
        assert schema.current_revision(connection) is None
        # The failed read leaves the connection usable.
        assert connection.execute("SELECT 1").fetchone()[0] == 1
    finally:
        connection.close()
    schema.upgrade(Database.parse(database_url))
    assert revision_of(database_url) == schema.HEAD


def test_current_revision_rolls_back_a_connection_inside_a_transaction(
    fresh_pg_url: Callable[[], str],
) -> None:
    import psycopg

    with psycopg.connect(Database.parse(fresh_pg_url()).target, autocommit=False) as connection:
        assert schema.current_revision(connection) is None
        assert connection.execute("SELECT 1").fetchone()[0] == 1


# -- opening a ledger on a database that is behind --------------------------------------------


def test_a_ledger_upgrades_an_embedded_sqlite_when_it_opens(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    url = f"sqlite:///{tmp_path / 'data' / 'ledger.db'}"
    ledger = Ledger(url, home=tmp_path / "home")
    try:
        ledger.open()
        assert revision_of(url) == schema.HEAD
        attempt = ledger.begin(key="run:1", call_id="1", user_id=None)
        assert attempt.created is True
    finally:
        ledger.close()


_OPEN_AT_ONCE = """
import sys, time
from pathlib import Path
from expediter.core.ledger import Ledger
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
ledger = Ledger(sys.argv[1], home=Path(sys.argv[3]))
ledger.open()
ledger.begin(key=f"run:{sys.argv[4]}", call_id=sys.argv[4], user_id=None)
ledger.close()
"""


def test_processes_opening_a_new_sqlite_ledger_at_once_take_turns(tmp_path: Path) -> None:
    for round_ in range(3):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        url = f"sqlite:///{folder / 'ledger.db'}"
        go = folder / "go"
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_AT_ONCE, url, str(go), str(folder / f"h{n}"), str(n)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(4)
        ]
        go.touch()
        for worker in workers:
            _, errors = worker.communicate(timeout=120)
            assert worker.returncode == 0, errors
        assert revision_of(url) == schema.HEAD


def test_a_host_creates_its_default_sqlite_ledger_on_the_first_call(
    make_host: Callable[..., Host], expediter_home: Path
) -> None:
    @expediter.tool
    def ping() -> str:
        """Answer."""
        return "pong"

    host = make_host(ping, record_calls=True)
    event = host.call("ping", "ping")
    assert event.ok
    url = f"sqlite:///{expediter_home / 'expediter.db'}"
    assert revision_of(url) == schema.HEAD
    assert host.ledger.get(event.key).status == "executed"


def test_an_embedded_sqlite_is_left_alone_when_auto_upgrade_is_off(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger(url, home=tmp_path / "home", auto_upgrade=False)
    with pytest.raises(LedgerError, match="run `expediter db upgrade`"):
        ledger.open()
    ledger.close()
    assert revision_of(url) is None


def test_a_postgresql_database_without_the_schema_is_refused_with_the_command_to_run(
    fresh_pg_url: Callable[[], str], tmp_path: Path
) -> None:
    url = fresh_pg_url()
    ledger = Ledger(url, home=tmp_path)
    for method in (ledger.open, ledger.check):
        with pytest.raises(
            LedgerError,
            match=r"has no schema yet \(no tables\), and expediter needs .*: run "
            r"`expediter db upgrade`$",
        ):
            method()
    ledger.close()
    assert describe(url) == {}  # nothing was created behind the operator's back


def test_a_postgresql_database_at_an_older_revision_is_refused_with_the_command_to_run(
    fresh_pg_url: Callable[[], str], tmp_path: Path
) -> None:
    url = fresh_pg_url()
    schema.upgrade(Database.parse(url))
    execute(url, "UPDATE alembic_version SET version_num = '0000_older'")
    ledger = Ledger(url, home=tmp_path)
    with pytest.raises(LedgerError) as raised:
        ledger.open()
    ledger.close()
    message = str(raised.value)
    assert "0000_older" in message
    assert schema.HEAD in message
    assert "run `expediter db upgrade`" in message


def test_a_postgresql_ledger_upgrades_when_asked_to(
    fresh_pg_url: Callable[[], str], tmp_path: Path
) -> None:
    url = fresh_pg_url()
    ledger = Ledger(url, home=tmp_path, auto_upgrade=True)
    try:
        ledger.open()
        assert revision_of(url) == schema.HEAD
    finally:
        ledger.close()


def test_a_host_call_on_an_out_of_date_postgresql_is_an_error_and_the_tool_does_not_run(
    make_host: Callable[..., Host], fresh_pg_url: Callable[[], str]
) -> None:
    runs: list[int] = []

    @expediter.tool
    def ping() -> str:
        """Answer."""
        runs.append(1)
        return "pong"

    url = fresh_pg_url()
    host = make_host(ping, record_calls=True, database_url=url)
    for _ in range(2):
        event = host.call("ping", "ping")
        assert (event.status, event.error_type) == ("error", "LedgerError")
        assert "run `expediter db upgrade`" in event.error
    assert runs == []
    # Once an operator upgrades the schema, the same host records and runs calls.
    schema.upgrade(Database.parse(url))
    event = host.call("ping", "ping")
    assert (event.status, runs) == ("completed", [1])
    assert host.ledger.get(event.key).status == "executed"
