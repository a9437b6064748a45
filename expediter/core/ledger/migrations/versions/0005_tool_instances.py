"""Stored tool instances with encrypted credentials, users' switches for shared instances and
default tools, the records tools keep through ``CallContext.storage``, and the delegation
column of the call ledger.

Revision ID: 0005_tool_instances
Revises: 0004_duplicate_of
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_tool_instances"
down_revision = "0004_duplicate_of"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_call_attempts") as batch:
        batch.add_column(sa.Column("delegated_from", sa.Text))
    op.create_table(
        "tool_instances",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("owner_id", sa.Text),
        sa.Column("tool", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False, server_default="configured"),
        sa.Column("config", sa.Text, nullable=False, server_default="{}"),
        sa.Column("credentials", sa.Text),
        sa.Column("secret_fields", sa.Text, nullable=False, server_default="[]"),
        sa.Column("key_id", sa.Text),
        sa.Column("actions", sa.Text, nullable=False, server_default="{}"),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("revision", sa.Integer, nullable=False, server_default="1"),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.CheckConstraint(
            "kind IN ('configured', 'default', 'inline')", name="ck_tool_instances_kind"
        ),
    )
    op.create_index("ix_tool_instances_owner", "tool_instances", ["owner_id"])
    op.create_table(
        "instance_settings",
        sa.Column("user_id", sa.Text, primary_key=True),
        sa.Column("instance_id", sa.Text, primary_key=True),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_table(
        "tool_records",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column(
            "instance_id",
            sa.Text,
            sa.ForeignKey("tool_instances.id", ondelete="CASCADE", name="fk_tool_records_instance"),
            nullable=False,
        ),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("tool", sa.Text, nullable=False),
        sa.Column("collection", sa.Text, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("text", sa.Text),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_index(
        "ix_tool_records_scope",
        "tool_records",
        ["instance_id", "user_id", "collection", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_tool_records_scope", "tool_records")
    op.drop_table("tool_records")
    op.drop_table("instance_settings")
    op.drop_index("ix_tool_instances_owner", "tool_instances")
    op.drop_table("tool_instances")
    with op.batch_alter_table("tool_call_attempts") as batch:
        batch.drop_column("delegated_from")
