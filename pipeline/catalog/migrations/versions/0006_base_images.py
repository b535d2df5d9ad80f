"""Known ancestry: the base image each build started from (``builds.base_image_id``, the
cloud's id for it: AMI id, Compute Engine image name, Azure image version, the local
base's key; ``builds.base_image``, its record: name, creation time, pinned or resolved,
the stack's query). Builds recorded before this have neither.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("builds") as batch:
        batch.add_column(sa.Column("base_image_id", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("base_image", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("builds") as batch:
        batch.drop_column("base_image")
        batch.drop_column("base_image_id")
