"""The ledger's tables (SQLAlchemy Core); migrations in ``migrations/`` create them."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from expediter.core.records.statuses import LEDGER_STATUSES

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
    #: A duplicate execution recorded on replay (its key is ``KEY#dup-N``): the ``KEY`` of the
    #: call it duplicates; added by migration 0004. NULL on every ordinary call.
    sa.Column("duplicate_of", sa.Text),
    sa.CheckConstraint(
        "status IN (" + ", ".join(f"'{status}'" for status in STATUSES) + ")",
        name="ck_tool_call_attempts_status",
    ),
    # Every index is written by every call it holds, so each earns its place by a read that
    # needs it (see queries.py), and partial indexes hold only the rows those reads look for.
    # The sweeper's running rows (those with a lease): on PostgreSQL a finished call leaves
    # the partial index without an index write; SQLite would delete the entry again in the
    # call's second commit (two extra WAL pages per call, the dearest index by far), so an
    # SQLite sweep, an occasional maintenance command, scans the table instead.
    sa.Index(
        "ix_tool_call_attempts_lease",
        "lease_expires_at",
        postgresql_where=sa.text("lease_expires_at IS NOT NULL"),
    ).ddl_if(dialect="postgresql"),
    # ``confirm`` of a turn's message; direct calls have none and skip it.
    sa.Index(
        "ix_tool_call_attempts_message",
        "message_id",
        sqlite_where=sa.text("message_id IS NOT NULL"),
        postgresql_where=sa.text("message_id IS NOT NULL"),
    ),
    # ``ledger ls --user U`` newest first; calls without a user cannot be asked for by user.
    sa.Index(
        "ix_tool_call_attempts_user",
        "user_id",
        "attempted_at",
        sqlite_where=sa.text("user_id IS NOT NULL"),
        postgresql_where=sa.text("user_id IS NOT NULL"),
    ),
    # ``ledger ls`` newest first (limit 100 by default) and ``--since``.
    sa.Index("ix_tool_call_attempts_attempted", "attempted_at"),
    # ``approvals ls`` and the expiry of approvals: only calls waiting for a decision.
    sa.Index(
        "ix_tool_call_attempts_waiting",
        "updated_at",
        sqlite_where=sa.text("status = 'awaiting_approval'"),
        postgresql_where=sa.text("status = 'awaiting_approval'"),
    ),
    # ``ledger show KEY``'s duplicates: only duplicate rows are in it (ordinary calls never
    # write it).
    sa.Index(
        "ix_tool_call_attempts_duplicate",
        "duplicate_of",
        sqlite_where=sa.text("duplicate_of IS NOT NULL"),
        postgresql_where=sa.text("duplicate_of IS NOT NULL"),
    ),
)
