"""Keep what a paused call needs to resume in another process, and why a decision was made.

Revision ID: 0002_call_request
Revises: 0001_tool_call_attempts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002_call_request"
down_revision = "0001_tool_call_attempts"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("tool_call_attempts") as batch:
        batch.add_column(sa.Column("request", _JSON))
        batch.add_column(sa.Column("decision_reason", sa.Text))
    op.create_index(
        "ix_tool_call_attempts_waiting",
        "tool_call_attempts",
        ["updated_at"],
        sqlite_where=sa.text("status = 'awaiting_approval'"),
        postgresql_where=sa.text("status = 'awaiting_approval'"),
    )


def downgrade() -> None:
    op.drop_index("ix_tool_call_attempts_waiting", "tool_call_attempts")
    with op.batch_alter_table("tool_call_attempts") as batch:
        batch.drop_column("decision_reason")
        batch.drop_column("request")
