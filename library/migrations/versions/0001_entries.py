"""Revision 1: one table of named entries (who, when, notes, content and its hash).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("notes", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("model", sa.String(500), nullable=False),
        sa.Column("engine", sa.String(64), nullable=False),
        sa.Column("facts", sa.JSON, nullable=False),
        sa.UniqueConstraint("kind", "name", name="uq_entries_kind_name"),
        sa.UniqueConstraint("kind", "content_hash", name="uq_entries_kind_hash"),
    )


def downgrade() -> None:
    op.drop_table("entries")
