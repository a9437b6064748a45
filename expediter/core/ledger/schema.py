"""The ledger's schema version: read it cheaply, upgrade it with the bundled alembic scripts."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from expediter.core.ledger.database import Database

__all__ = ["HEAD", "current_revision", "script_head", "upgrade"]

logger = logging.getLogger(__name__)

#: The newest migration, for the revision check at every ledger open. Written out because
#: asking alembic (``script_head()``) imports alembic and SQLAlchemy, ~450 ms, and the CLI's
#: call path must import neither (benchmarks/README.md, ``expediter --help`` and per-call
#: budgets); ``tests/core/ledger/test_schema.py`` checks it equals ``script_head()``.
HEAD = "0006_oauth_tokens"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def current_revision(connection: Any) -> str | None:
    """The revision a database is at (None for an empty database), without importing alembic."""
    try:
        cursor = connection.execute("SELECT version_num FROM alembic_version")
        rows = cursor.fetchall()
    except Exception:
        if hasattr(connection, "rollback") and not getattr(connection, "autocommit", True):
            connection.rollback()
        return None
    return str(rows[0][0]) if rows else None


def _config(connection: Any) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def upgrade(database: Database, revision: str = "head") -> str | None:
    """Apply the bundled migrations up to ``revision``; returns the revision reached.

    An empty database going to head gets the current tables directly and is stamped at head
    with alembic (what every migration in order would build; a test checks the two agree).
    """
    import sqlalchemy as sa
    from alembic import command

    if database.dialect == "sqlite":
        database.prepare_file()
    engine = sa.create_engine(database.sqlalchemy_url, poolclass=sa.pool.NullPool)
    if database.dialect == "sqlite":
        _serialized(engine)
    try:
        with engine.begin() as connection:
            config = _config(connection)
            head = script_head()
            if revision in ("head", head) and _is_empty(connection):
                from expediter.core.ledger.tables import metadata

                metadata.create_all(connection)
                command.stamp(config, head)
            else:
                command.upgrade(config, revision)
        with engine.connect() as connection:
            reached = connection.exec_driver_sql("SELECT version_num FROM alembic_version")
            row = reached.fetchone()
    finally:
        engine.dispose()
    logger.info("ledger schema of %s is at %s", database.display, row[0] if row else None)
    return str(row[0]) if row else None


def _serialized(engine: Any) -> None:
    """Make each SQLite upgrade one ``BEGIN IMMEDIATE`` transaction: two processes opening a
    new ledger at once then take turns (the second waits, then finds the tables made),
    where otherwise both would see an empty file and both create the tables."""
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the transaction below is the only one

    @event.listens_for(engine, "begin")
    def _take_the_write_lock(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _is_empty(connection: Any) -> bool:
    import sqlalchemy as sa

    names = set(sa.inspect(connection).get_table_names())
    return not names & {"alembic_version", "tool_call_attempts"}


def _scripts() -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config(None))


def script_head() -> str:
    """The head revision of the bundled migration scripts (imports alembic)."""
    head = _scripts().get_current_head()
    if head is None:  # pragma: no cover - the package always ships its migrations
        raise RuntimeError(f"no migrations found in {MIGRATIONS}")
    return str(head)


def heads() -> list[str]:
    """Every head revision of the bundled scripts (one, unless the history forked)."""
    return list(_scripts().get_heads())
