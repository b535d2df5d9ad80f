"""Each build's CycloneDX SBOM and the inventory it came from (``sboms``), for
``imagectl diff`` (``imagectl.provenance``).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sboms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("build_pk", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("inventory", sa.JSON(), nullable=False),
        sa.Column("held", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["build_pk"], ["builds.id"], name="fk_sboms_build_pk_builds"),
        sa.PrimaryKeyConstraint("id", name="pk_sboms"),
        sa.UniqueConstraint("build_pk", name="uq_sboms_build_pk"),
    )


def downgrade() -> None:
    op.drop_table("sboms")
