"""Create tool_call_attempts.

Revision ID: 0001_tool_call_attempts
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001_tool_call_attempts"
down_revision = None
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_STATUSES = (
    "proposed",
    "awaiting_approval",
    "approved",
    "denied",
    "executed",
    "confirmed",
    "failed",
    "abandoned",
)


def upgrade() -> None:
    op.create_table(
        "tool_call_attempts",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("call_id", sa.Text, nullable=False),
        sa.Column("name", sa.Text),
        sa.Column("message_id", sa.Text),
        sa.Column("run_id", sa.Text),
        sa.Column("user_id", sa.Text),
        sa.Column("owner_id", sa.Text),
        sa.Column("instance_id", sa.Text),
        sa.Column("tool", sa.Text),
        sa.Column("action", sa.Text),
        sa.Column("arguments", _JSON),
        sa.Column("decision", sa.String(64)),
        sa.Column("decided_by", sa.Text),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("result", _JSON),
        sa.Column("error", sa.Text),
        sa.Column("attempted_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.Column("finished_at", sa.Double),
        sa.Column("duration_ms", sa.Double),
        sa.Column("lease_expires_at", sa.Double),
        sa.Column("worker_id", sa.Text),
        sa.Column("attempt_id", sa.String(64)),
        sa.Column("late", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.CheckConstraint(
            "status IN (" + ", ".join(f"'{status}'" for status in _STATUSES) + ")",
            name="ck_tool_call_attempts_status",
        ),
    )
    # Partial indexes (see tables.py): the running rows, and calls in a conversation.
    op.create_index(
        "ix_tool_call_attempts_lease",
        "tool_call_attempts",
        ["lease_expires_at"],
        sqlite_where=sa.text("lease_expires_at IS NOT NULL"),
        postgresql_where=sa.text("lease_expires_at IS NOT NULL"),
    )
    op.create_index(
        "ix_tool_call_attempts_message",
        "tool_call_attempts",
        ["message_id"],
        sqlite_where=sa.text("message_id IS NOT NULL"),
        postgresql_where=sa.text("message_id IS NOT NULL"),
    )
    op.create_index("ix_tool_call_attempts_user", "tool_call_attempts", ["user_id", "attempted_at"])
    op.create_index("ix_tool_call_attempts_attempted", "tool_call_attempts", ["attempted_at"])


def downgrade() -> None:
    op.drop_table("tool_call_attempts")
