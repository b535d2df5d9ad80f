"""Trust bound to the build: each build's fetched manifest digest
(``builds.manifest_sha256``, the attested manifest) and signed revocations
(``revocations``, ``imagectl revoke``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("builds") as batch:
        batch.add_column(sa.Column("manifest_sha256", sa.String(length=64), nullable=True))
    op.create_table(
        "revocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("attestation", sa.String(length=80), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("keyid", sa.String(length=128), nullable=False),
        sa.Column("envelope", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["image_id"], ["images.id"], name="fk_revocations_image_id_images"),
        sa.PrimaryKeyConstraint("id", name="pk_revocations"),
        sa.UniqueConstraint("digest", name="uq_revocations_digest"),
    )
    op.create_index("ix_revocations_image_id", "revocations", ["image_id"])


def downgrade() -> None:
    op.drop_index("ix_revocations_image_id", table_name="revocations")
    op.drop_table("revocations")
    with op.batch_alter_table("builds") as batch:
        batch.drop_column("manifest_sha256")
