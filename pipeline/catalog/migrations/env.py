"""Alembic environment for the image catalog.

Run programmatically by ``imagectl.catalog.db.migrate``, which passes an open connection in
``config.attributes["connection"]``; there is no alembic.ini. To write a new revision
against a scratch SQLite file::

    python -c "from imagectl.catalog.db import revision; revision('add x')"
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from imagectl.catalog.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=True,  # SQLite cannot ALTER most things: batch mode copies tables
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "sqlite://")
    with engine.begin() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("imagectl migrations run online only (imagectl.catalog.db.migrate)")
run_migrations_online()
