"""Canary pointers beside "latest" (``canary_pointers``, ``imagectl promote --canary``) and
the decisions ``imagectl rollout`` makes from fleet health (``rollout_decisions``).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "canary_pointers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=False),
        sa.Column("cloud", sa.String(length=32), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("previous_image_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["image_id"], ["images.id"], name="fk_canary_pointers_image_id_images"
        ),
        sa.ForeignKeyConstraint(
            ["previous_image_id"],
            ["images.id"],
            name="fk_canary_pointers_previous_image_id_images",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_canary_pointers"),
        sa.UniqueConstraint(
            "stack", "cloud", "region", name="uq_canary_pointers_stack_cloud_region"
        ),
    )
    op.create_table(
        "rollout_decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=False),
        sa.Column("cloud", sa.String(length=32), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=True),
        sa.Column("baseline_id", sa.Integer(), nullable=True),
        sa.Column("decision", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("window_s", sa.Integer(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("applied", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "decision IN ('advance', 'hold', 'rollback')", name="ck_rollout_decisions_decision"
        ),
        sa.ForeignKeyConstraint(
            ["candidate_id"], ["images.id"], name="fk_rollout_decisions_candidate_id_images"
        ),
        sa.ForeignKeyConstraint(
            ["baseline_id"], ["images.id"], name="fk_rollout_decisions_baseline_id_images"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_rollout_decisions"),
    )
    op.create_index("ix_rollout_decisions_stack", "rollout_decisions", ["stack"])


def downgrade() -> None:
    op.drop_index("ix_rollout_decisions_stack", table_name="rollout_decisions")
    op.drop_table("rollout_decisions")
    op.drop_table("canary_pointers")
