"""The ledger's tables (SQLAlchemy Core); migrations in ``migrations/`` create them."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from expediter.core.records.calls import LEDGER_STATUSES

__all__ = ["STATUSES", "metadata", "tool_call_attempts"]

#: Every status a call attempt can be in.
STATUSES = LEDGER_STATUSES

metadata = sa.MetaData()

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

#: One row per attempted tool call. Times are seconds since the epoch (UTC).
tool_call_attempts = sa.Table(
    "tool_call_attempts",
    metadata,
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
    #: What a paused call (awaiting approval or a client's result) needs to resume elsewhere.
    sa.Column("request", _JSON),
    #: Why the decision was made (the approver's or the policy's words); added with ``request``.
    sa.Column("decision_reason", sa.Text),
    sa.CheckConstraint(
        "status IN (" + ", ".join(f"'{status}'" for status in STATUSES) + ")",
        name="ck_tool_call_attempts_status",
    ),
    # Partial indexes hold only the rows their queries look for, so most calls touch fewer
    # indexes: the sweeper's running rows (those with a lease), calls in a conversation, and
    # calls waiting for a decision.
    sa.Index(
        "ix_tool_call_attempts_lease",
        "lease_expires_at",
        sqlite_where=sa.text("lease_expires_at IS NOT NULL"),
        postgresql_where=sa.text("lease_expires_at IS NOT NULL"),
    ),
    sa.Index(
        "ix_tool_call_attempts_message",
        "message_id",
        sqlite_where=sa.text("message_id IS NOT NULL"),
        postgresql_where=sa.text("message_id IS NOT NULL"),
    ),
    sa.Index("ix_tool_call_attempts_user", "user_id", "attempted_at"),
    sa.Index("ix_tool_call_attempts_attempted", "attempted_at"),
    sa.Index(
        "ix_tool_call_attempts_waiting",
        "updated_at",
        sqlite_where=sa.text("status = 'awaiting_approval'"),
        postgresql_where=sa.text("status = 'awaiting_approval'"),
    ),
)
