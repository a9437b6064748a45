"""Write fewer index pages per call: the user index holds only calls with a user, and SQLite
keeps no lease index (its sweeps scan the table; see tables.py).

Revision ID: 0003_lean_indexes
Revises: 0002_call_request
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_lean_indexes"
down_revision = "0002_call_request"
branch_labels = None
depends_on = None


def _sqlite() -> bool:
    return bool(op.get_bind().dialect.name == "sqlite")


def upgrade() -> None:
    op.drop_index("ix_tool_call_attempts_user", "tool_call_attempts")
    op.create_index(
        "ix_tool_call_attempts_user",
        "tool_call_attempts",
        ["user_id", "attempted_at"],
        sqlite_where=sa.text("user_id IS NOT NULL"),
        postgresql_where=sa.text("user_id IS NOT NULL"),
    )
    if _sqlite():
        op.drop_index("ix_tool_call_attempts_lease", "tool_call_attempts")


def downgrade() -> None:
    if _sqlite():
        op.create_index(
            "ix_tool_call_attempts_lease",
            "tool_call_attempts",
            ["lease_expires_at"],
            sqlite_where=sa.text("lease_expires_at IS NOT NULL"),
        )
    op.drop_index("ix_tool_call_attempts_user", "tool_call_attempts")
    op.create_index("ix_tool_call_attempts_user", "tool_call_attempts", ["user_id", "attempted_at"])
