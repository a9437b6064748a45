"""The ledger's tables (SQLAlchemy Core); migrations in ``migrations/`` create them."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from expediter.core.records.statuses import LEDGER_STATUSES

__all__ = [
    "STATUSES",
    "instance_settings",
    "metadata",
    "oauth_tokens",
    "tool_call_attempts",
    "tool_instances",
    "tool_records",
]

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
    #: A call made with a tool instance another user owns: the owner's id (their configuration
    #: and credentials were used on the invoker's behalf); added by migration 0005.
    sa.Column("delegated_from", sa.Text),
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


#: Stored tool instances: a tool with its configuration, owned by a user (or shared: no owner).
#: ``config`` holds the plain fields as JSON text; the secret ones are sealed in
#: ``credentials`` (AES-GCM, see ``core/instances/keys.py``), their names in
#: ``secret_fields`` so listings can show ``"***"`` without decrypting anything.
tool_instances = sa.Table(
    "tool_instances",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    #: NULL: a shared instance (the operator's), offered to every user.
    sa.Column("owner_id", sa.Text),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    #: ``configured`` (added by a user or the operator), ``default`` (a default tool's row,
    #: made on first use so its data has a row to point to) or ``inline`` (an instance the
    #: application passed in memory, recorded only to anchor its tool's data).
    sa.Column("kind", sa.String(16), nullable=False, server_default="configured"),
    sa.Column("config", sa.Text, nullable=False, server_default="{}"),
    sa.Column("credentials", sa.Text),
    sa.Column("secret_fields", sa.Text, nullable=False, server_default="[]"),
    #: The id of the key that sealed ``credentials`` (``keys rotate`` finds the older ones).
    sa.Column("key_id", sa.Text),
    #: Per-action overrides as JSON: ``{action: {"active", "require_approval", "fixed"}}``.
    sa.Column("actions", sa.Text, nullable=False, server_default="{}"),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    #: Raised by every change: a process serves an instance from its cache while it matches.
    sa.Column("revision", sa.Integer, nullable=False, server_default="1"),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.CheckConstraint(
        "kind IN ('configured', 'default', 'inline')", name="ck_tool_instances_kind"
    ),
    # A user's toolset: their instances and the shared ones.
    sa.Index("ix_tool_instances_owner", "owner_id"),
)

#: A user's own switch for an instance they do not own (a shared instance or a default tool).
instance_settings = sa.Table(
    "instance_settings",
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    #: No foreign key: a default tool is switched off before its row exists.
    sa.Column("instance_id", sa.Text, primary_key=True),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
)

#: What tools keep through ``CallContext.storage``: rows per instance, invoker and collection
#: (a note, a to-do, a memory), the record itself as JSON text.
tool_records = sa.Table(
    "tool_records",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column(
        "instance_id",
        sa.Text,
        sa.ForeignKey("tool_instances.id", ondelete="CASCADE", name="fk_tool_records_instance"),
        nullable=False,
    ),
    #: The invoker whose data this is ('' for calls made without a user).
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("collection", sa.Text, nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    #: What ``search`` matches (lower case).
    sa.Column("text", sa.Text),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.Index("ix_tool_records_scope", "instance_id", "user_id", "collection", "created_at"),
)

#: The OAuth tokens a tool instance keeps per user through ``CallContext.tokens`` (an MCP
#: server's access and refresh tokens, its registered client): one sealed blob per slot, sealed
#: with the instance owner's key and bound to its row (``core/instances/tokens.py``).
oauth_tokens = sa.Table(
    "oauth_tokens",
    metadata,
    sa.Column(
        "instance_id",
        sa.Text,
        sa.ForeignKey("tool_instances.id", ondelete="CASCADE", name="fk_oauth_tokens_instance"),
        primary_key=True,
    ),
    #: The user whose tokens these are ('' for calls made without a user, as in tool_records).
    sa.Column("user_id", sa.Text, primary_key=True),
    #: The slot the tool named (``tokens``, ``client``...).
    sa.Column("name", sa.Text, primary_key=True),
    #: The sealed JSON object (``ex1.<key id>.<data>``); never the tokens in clear.
    sa.Column("data", sa.Text, nullable=False),
    #: When the access token expires (seconds since the epoch), if the tool said; for operators.
    sa.Column("expires_at", sa.Double),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
)
