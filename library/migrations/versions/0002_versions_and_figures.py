"""Revision 2: engine and model versions, the time of the last edit, a device index, and
validation figures one row each (so a figure can be followed over time).

Rows written under revision 1 keep every value; the new columns start empty.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("entries") as batch:
        batch.add_column(
            sa.Column("engine_version", sa.String(64), nullable=False, server_default="")
        )
        batch.add_column(
            sa.Column("model_version", sa.String(64), nullable=False, server_default="")
        )
        batch.add_column(sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_entries_kind_device", "entries", ["kind", "device"])
    op.create_table(
        "validation_figures",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "entry_id",
            sa.Integer,
            sa.ForeignKey("entries.id", ondelete="CASCADE", name="fk_figures_entry"),
            nullable=False,
        ),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
    )
    op.create_index("ix_validation_figures_entry_id", "validation_figures", ["entry_id"])
    op.create_index("ix_validation_figures_metric", "validation_figures", ["metric"])


def downgrade() -> None:
    op.drop_table("validation_figures")
    op.drop_index("ix_entries_kind_device", table_name="entries")
    with op.batch_alter_table("entries") as batch:
        batch.drop_column("updated_at")
        batch.drop_column("model_version")
        batch.drop_column("engine_version")
