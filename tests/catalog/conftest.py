"""Catalog fixtures: every catalog test runs on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imagectl.catalog.db import Catalog, open_catalog


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty catalog database URL: a fresh SQLite file or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Catalog]:
    """The catalog at ``catalog_url``, migrated (as ``open_catalog`` does on first use)."""
    cat = open_catalog(catalog_url)
    try:
        yield cat
    finally:
        cat.close()
