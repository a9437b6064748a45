"""Record a duplicate execution (found when the outage spool is replayed) as its own row,
``KEY#dup-N``, saying which call it duplicates.

Revision ID: 0004_duplicate_of
Revises: 0003_lean_indexes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_duplicate_of"
down_revision = "0003_lean_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_call_attempts") as batch:
        batch.add_column(sa.Column("duplicate_of", sa.Text))
    op.create_index(
        "ix_tool_call_attempts_duplicate",
        "tool_call_attempts",
        ["duplicate_of"],
        sqlite_where=sa.text("duplicate_of IS NOT NULL"),
        postgresql_where=sa.text("duplicate_of IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_tool_call_attempts_duplicate", "tool_call_attempts")
    with op.batch_alter_table("tool_call_attempts") as batch:
        batch.drop_column("duplicate_of")
