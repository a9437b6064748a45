"""The ledger's schema version: read it cheaply, upgrade it with the bundled alembic scripts."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from expediter.core.ledger.database import Database

__all__ = ["HEAD", "current_revision", "upgrade"]

logger = logging.getLogger(__name__)

#: The newest migration; ``tests`` check it matches the scripts in ``migrations/versions``.
HEAD = "0002_call_request"
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
    (what every migration in order would build; a test checks the two agree), which spares
    importing alembic on a fresh install.
    """
    import sqlalchemy as sa

    engine = sa.create_engine(database.sqlalchemy_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as connection:
            if revision in ("head", HEAD) and _is_empty(connection):
                _create_at_head(connection)
            else:
                from alembic import command

                command.upgrade(_config(connection), revision)
        with engine.connect() as connection:
            reached = connection.exec_driver_sql("SELECT version_num FROM alembic_version")
            row = reached.fetchone()
    finally:
        engine.dispose()
    logger.info("ledger schema of %s is at %s", database.display, row[0] if row else None)
    return str(row[0]) if row else None


def _is_empty(connection: Any) -> bool:
    import sqlalchemy as sa

    names = set(sa.inspect(connection).get_table_names())
    return not names & {"alembic_version", "tool_call_attempts"}


def _create_at_head(connection: Any) -> None:
    import sqlalchemy as sa

    from expediter.core.ledger.tables import metadata

    metadata.create_all(connection)
    version = sa.Table(
        "alembic_version",
        sa.MetaData(),
        sa.Column("version_num", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    version.create(connection)
    connection.execute(version.insert().values(version_num=HEAD))


def heads() -> list[str]:
    """The head revisions of the bundled scripts (for tests)."""
    from alembic.script import ScriptDirectory

    config = _config(None)
    return list(ScriptDirectory.from_config(config).get_heads())
