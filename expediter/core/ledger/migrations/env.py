"""Alembic environment: runs on the connection expediter hands over (see ``ledger.schema``)."""

from __future__ import annotations

from alembic import context

from expediter.core.ledger.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `expediter db upgrade` (expediter.core.ledger)")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
