"""Initial catalog schema: builds, images, validation runs, promotions, pointers, events,
locks.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Frozen copy of lifecycle.ImageState at this revision: a new state needs a new revision.
IMAGE_STATES = (
    "built", "validating", "validated", "blocked", "inconclusive", "promoting", "promoted",
    "partially_promoted", "rolled_back", "deprecated", "deleted",
)  # fmt: skip


def _at(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "builds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("build_id", sa.String(length=128), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=False),
        sa.Column("stack_digest", sa.String(length=128), nullable=False),
        sa.Column("cloud", sa.String(length=32), nullable=False),
        sa.Column("git_commit", sa.String(length=64), nullable=True),
        sa.Column("packer_manifest", sa.JSON(), nullable=True),
        sa.Column("artifact_id", sa.String(length=512), nullable=True),
        _at("started_at"),
        _at("finished_at", nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_builds"),
        sa.UniqueConstraint("build_id", name="uq_builds_build_id"),
    )
    op.create_index("ix_builds_stack", "builds", ["stack"])

    op.create_table(
        "locks",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        _at("acquired_at"),
        sa.PrimaryKeyConstraint("name", name="pk_locks"),
    )

    op.create_table(
        "images",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cloud_image_id", sa.String(length=512), nullable=False),
        sa.Column("cloud", sa.String(length=32), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=False),
        sa.Column("stack_digest", sa.String(length=128), nullable=False),
        sa.Column("build_pk", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=32), nullable=False),
        _at("created_at"),
        _at("state_changed_at"),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("blocked_reason", sa.Text(), nullable=True),
        sa.CheckConstraint(_in("state", IMAGE_STATES), name="ck_images_state"),
        sa.ForeignKeyConstraint(["build_pk"], ["builds.id"], name="fk_images_build_pk_builds"),
        sa.PrimaryKeyConstraint("id", name="pk_images"),
        sa.UniqueConstraint("cloud", "region", "cloud_image_id", name="uq_images_cloud_region_id"),
    )
    op.create_index("ix_images_build_pk", "images", ["build_pk"])
    op.create_index("ix_images_stack_cloud_state", "images", ["stack", "cloud", "state"])

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        _at("at"),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=True),
        sa.Column("cloud", sa.String(length=32), nullable=True),
        sa.Column("image_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["image_id"], ["images.id"], name="fk_events_image_id_images"),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_image_id", "events", ["image_id"])
    op.create_index("ix_events_stack_cloud_at", "events", ["stack", "cloud", "at"])

    op.create_table(
        "pointers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=False),
        sa.Column("cloud", sa.String(length=32), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("previous_image_id", sa.Integer(), nullable=True),
        _at("updated_at"),
        sa.Column("updated_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(["image_id"], ["images.id"], name="fk_pointers_image_id_images"),
        sa.ForeignKeyConstraint(
            ["previous_image_id"], ["images.id"], name="fk_pointers_previous_image_id_images"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_pointers"),
        sa.UniqueConstraint("stack", "cloud", "region", name="uq_pointers_stack_cloud_region"),
    )

    op.create_table(
        "promotions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("stack", sa.String(length=128), nullable=False),
        sa.Column("cloud", sa.String(length=32), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("target_regions", sa.JSON(), nullable=False),
        sa.Column("completed_regions", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("from_state", sa.String(length=32), nullable=False),
        _at("started_at"),
        _at("finished_at", nullable=True),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("force_reason", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["image_id"], ["images.id"], name="fk_promotions_image_id_images"),
        sa.PrimaryKeyConstraint("id", name="pk_promotions"),
    )
    op.create_index("ix_promotions_image_id", "promotions", ["image_id"])
    op.create_index("ix_promotions_stack", "promotions", ["stack"])

    op.create_table(
        "validation_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("shape", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("profile", sa.String(length=64), nullable=False),
        sa.Column("verdict", sa.String(length=8), nullable=False),
        sa.Column("worst_action", sa.String(length=32), nullable=False),
        sa.Column("receipt", sa.JSON(), nullable=False),
        _at("received_at"),
        sa.Column("validator_version", sa.String(length=64), nullable=False),
        sa.CheckConstraint(_in("verdict", ("pass", "fail")), name="ck_validation_runs_verdict"),
        sa.ForeignKeyConstraint(
            ["image_id"], ["images.id"], name="fk_validation_runs_image_id_images"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_validation_runs"),
    )
    op.create_index("ix_validation_runs_image_id", "validation_runs", ["image_id"])


def downgrade() -> None:
    for table in ("validation_runs", "promotions", "pointers", "events", "images", "locks"):
        op.drop_table(table)
    op.drop_table("builds")
