"""Alembic migrations: from an empty database to exactly the models' schema."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

import imagectl.catalog.migrations as migrations_pkg
from imagectl.catalog.db import (
    CatalogUnavailable,
    current_revision,
    head_revision,
    make_engine,
    migrate,
    open_catalog,
)
from imagectl.catalog.models import Base

TABLES = {
    "alembic_version",
    "builds",
    "images",
    "validation_runs",
    "promotions",
    "pointers",
    "events",
    "locks",
    "pointer_flips",
    "attestations",
    "sboms",
    "revocations",
    "canary_pointers",
    "rollout_decisions",
}


def test_open_migrates_an_empty_database_to_head(catalog_url: str) -> None:
    engine = make_engine(catalog_url)
    assert set(inspect(engine).get_table_names()) == set()
    assert current_revision(engine) is None
    catalog = open_catalog(catalog_url)
    try:
        assert current_revision(engine) == head_revision() == "0008"
        assert set(inspect(engine).get_table_names()) == TABLES
    finally:
        catalog.close()
        engine.dispose()


def test_migrations_produce_exactly_the_models_schema(catalog_url: str) -> None:
    engine = make_engine(catalog_url)
    migrate(engine)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    engine.dispose()
    assert diff == []


def test_a_changed_model_is_detected_by_the_comparison(catalog_url: str) -> None:
    """The comparison above can fail: a column the migrations lack shows up as a diff."""
    from sqlalchemy import Column, MetaData, String

    engine = make_engine(catalog_url)
    migrate(engine)
    changed = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["images"].append_column(Column("extra", String(10)))
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), changed)
    engine.dispose()
    assert [d[0] for d in diff] == ["add_column"]
    assert diff[0][2] == "images" and diff[0][3].name == "extra"


def test_downgrade_to_base_and_upgrade_again(catalog_url: str) -> None:
    engine = make_engine(catalog_url)
    migrate(engine)
    migrate_down(engine)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    migrate(engine)
    assert set(inspect(engine).get_table_names()) == TABLES
    engine.dispose()


def migrate_down(engine: object) -> None:
    from alembic import command

    from imagectl.catalog.db import _alembic_config

    with engine.begin() as conn:  # type: ignore[attr-defined]
        command.downgrade(_alembic_config(conn), "base")


def test_second_open_does_not_migrate_again(catalog_url: str) -> None:
    open_catalog(catalog_url).close()
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM alembic_version"))
        conn.execute(text("INSERT INTO alembic_version (version_num) VALUES ('0008')"))
    # Opening again finds head and leaves the schema alone (no "table exists" errors).
    open_catalog(catalog_url).close()
    assert current_revision(engine) == "0008"
    engine.dispose()


def test_database_from_a_newer_imagectl_is_refused(catalog_url: str) -> None:
    open_catalog(catalog_url).close()
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(CatalogUnavailable, match=r"schema revision '9999'.*newest known: '0008'"):
        open_catalog(catalog_url)


def test_default_catalog_is_a_sqlite_file_in_the_state_dir(_isolated_state: Path) -> None:
    catalog = open_catalog()
    try:
        assert catalog.backend == "sqlite"
        assert (_isolated_state / "catalog.db").is_file()
    finally:
        catalog.close()


def test_migration_files_ship_in_the_wheel(tmp_path: Path) -> None:
    """Build the wheel and check the Alembic environment and revisions are inside."""

    from imagectl.packer.build import build_validator_wheel
    from imagectl.paths import Workspace

    root = Path(__file__).resolve().parents[2]
    build_validator_wheel(Workspace(root=root, images=root / "images"), tmp_path)
    (wheel,) = tmp_path.glob("imagectl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    base = "imagectl/catalog/migrations/"
    expected = {
        "env.py",
        "script.py.mako",
        "versions/__init__.py",
        "versions/0001_initial.py",
        "versions/0002_pointer_flips.py",
        "versions/0003_attestations.py",
        "versions/0004_sboms.py",
    }
    assert {base + n for n in expected} <= names
    # and the installed copy the code uses is the same folder layout
    folder = Path(migrations_pkg.__file__).parent
    assert all((folder / n).is_file() for n in expected)


def test_sqlite_engine_enforces_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    engine.dispose()


def test_the_head_read_from_the_scripts_is_alembics() -> None:
    from imagectl.catalog.db import known_head

    assert known_head() == head_revision()


def test_a_catalog_at_head_opens_without_alembic(catalog_url: str) -> None:
    """The check that skips Alembic (known_head) reads the scripts, not Alembic: a
    catalog at head opens in a fresh process without importing it, and one a revision
    behind still migrates (through Alembic) in the same fresh process."""
    import subprocess
    import sys

    from alembic import command

    from imagectl.catalog.db import _alembic_config

    script = (
        "import sys\n"
        "from imagectl.catalog.db import open_catalog\n"
        f"open_catalog({catalog_url!r}).close()\n"
        "print('alembic' in sys.modules)\n"
    )

    def fresh_open() -> str:
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        return proc.stdout.strip()

    assert fresh_open() == "True"  # a new catalog: created through Alembic
    assert fresh_open() == "False"  # at head
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        command.downgrade(_alembic_config(conn), "0005")
    assert "base_image" not in {c["name"] for c in inspect(engine).get_columns("builds")}
    assert fresh_open() == "True"  # behind: upgraded
    assert current_revision(engine) == head_revision()
    assert "base_image" in {c["name"] for c in inspect(engine).get_columns("builds")}
    engine.dispose()


def test_builds_from_before_0008_have_no_expectations_record(catalog_url: str) -> None:
    """Migration 0008 adds the build's expectations record; a build recorded before it
    keeps its row and has none (validate-image then takes the old path, see
    imagectl.validation.stage)."""
    from alembic import command

    from imagectl.catalog.db import _alembic_config

    engine = make_engine(catalog_url)
    migrate(engine)
    with engine.begin() as conn:
        command.downgrade(_alembic_config(conn), "0007")
        assert "expectations" not in {c["name"] for c in inspect(conn).get_columns("builds")}
        conn.execute(
            text(
                "INSERT INTO builds (build_id, stack, stack_digest, cloud, started_at, outcome)"
                " VALUES ('old', 's', 'abc', 'aws', '2026-11-01 00:00:00', 'succeeded')"
            )
        )
    migrate(engine)
    with engine.connect() as conn:
        row = conn.execute(
            text("SELECT expectations_digest, expectations FROM builds WHERE build_id = 'old'")
        ).one()
    engine.dispose()
    assert tuple(row) == (None, None)
