"""Signed validation attestations (``attestations``): the DSSE envelope of each image's
attestation, its digest and signing key (``imagectl.provenance``).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attestations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("keyid", sa.String(length=128), nullable=False),
        sa.Column("envelope", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["image_id"], ["images.id"], name="fk_attestations_image_id_images"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_attestations"),
        sa.UniqueConstraint("digest", name="uq_attestations_digest"),
    )
    op.create_index("ix_attestations_image_id", "attestations", ["image_id"])


def downgrade() -> None:
    op.drop_index("ix_attestations_image_id", table_name="attestations")
    op.drop_table("attestations")
