"""Pointer flips recorded per region and cloud (``pointer_flips``): a promotion's flip
that stopped half way is visible, resumable, and undone exactly by a rollback.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

FLIP_STATES = ("pending", "done", "undone")


def upgrade() -> None:
    op.create_table(
        "pointer_flips",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("promotion_id", sa.Integer(), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=False),
        sa.Column("cloud", sa.String(length=32), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("from_image_id", sa.Integer(), nullable=True),
        sa.Column("to_image_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["promotion_id"], ["promotions.id"], name="fk_pointer_flips_promotion_id_promotions"
        ),
        sa.ForeignKeyConstraint(
            ["from_image_id"], ["images.id"], name="fk_pointer_flips_from_image_id_images"
        ),
        sa.ForeignKeyConstraint(
            ["to_image_id"], ["images.id"], name="fk_pointer_flips_to_image_id_images"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_pointer_flips"),
        sa.UniqueConstraint("promotion_id", "region", name="uq_pointer_flips_promotion_region"),
    )
    op.create_index("ix_pointer_flips_promotion_id", "pointer_flips", ["promotion_id"])


def downgrade() -> None:
    op.drop_index("ix_pointer_flips_promotion_id", table_name="pointer_flips")
    op.drop_table("pointer_flips")
