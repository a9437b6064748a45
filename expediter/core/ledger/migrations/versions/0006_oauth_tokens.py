"""The OAuth tokens tool instances keep per user (``CallContext.tokens``), sealed with the
instance owner's key.

Revision ID: 0006_oauth_tokens
Revises: 0005_tool_instances
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_oauth_tokens"
down_revision = "0005_tool_instances"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "oauth_tokens",
        sa.Column(
            "instance_id",
            sa.Text,
            sa.ForeignKey("tool_instances.id", ondelete="CASCADE", name="fk_oauth_tokens_instance"),
            primary_key=True,
        ),
        sa.Column("user_id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("expires_at", sa.Double),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("oauth_tokens")
