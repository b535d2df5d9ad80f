"""Expectations once, at build: what each build resolved its image's expectations to, per
validation shape (``builds.expectations``: shape -> the validator's ``Expectations``), and
the stack digest they came from (``builds.expectations_digest``). ``imagectl
validate-image`` judges the image by them instead of resolving the stack again. Builds
recorded before this have neither (validate-image then resolves the stack as before and
refuses an image whose stack changed since).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("builds") as batch:
        batch.add_column(sa.Column("expectations_digest", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("expectations", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("builds") as batch:
        batch.drop_column("expectations")
        batch.drop_column("expectations_digest")
