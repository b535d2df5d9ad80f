"""Recording an SBOM is linear in its packages (issue 29 item 6).

It was quadratic: cyclonedx-python-lib's model looked each dependency up in a list and
jsonschema's ``uniqueItems`` compared every pair of components (1,000 packages 6 s, 5,000
over 30 s). Timings are the benchmark's (``benchmarks/sbom_record.py``); here the work is
counted, which no machine's speed changes: the Python function calls of
``record_build_sbom`` (cProfile's count) grow at most as fast as the packages, and the
catalog statements not at all.
"""

from __future__ import annotations

import cProfile
import json
import pstats
from pathlib import Path

import pytest
from sqlalchemy import event

from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from imagectl.provenance.record import record_build_sbom
from imagectl.stacks import load_resolved
from tests.support import REPO


def inventory(n: int) -> dict:
    """``n`` dpkg packages, a tenth as many Python packages, the NVIDIA modules."""
    return {
        "schema_version": 1,
        "kernel": "6.1.0-28-cloud-amd64",
        "dpkg": [
            {"name": f"lib{i}", "version": f"1.{i}-1", "source": f"src{i // 3}",
             "source_version": f"1.{i}-1", "arch": "amd64" if i % 5 else "all"}
            for i in range(n)
        ],
        "python": [{"name": f"Py-Pkg{i}", "version": "2.0"} for i in range(n // 10)],
        "kernel_modules": [
            {"name": m, "version": "580.95.05", "vermagic": "6.1.0-28-cloud-amd64 SMP"}
            for m in ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm")
        ],
    }  # fmt: skip


def _record(tmp_path: Path, n: int) -> tuple[int, int]:
    """(Python calls, SQL statements) of recording an SBOM of ``n`` packages."""
    catalog = open_catalog(f"sqlite:///{tmp_path / f'catalog-{n}.db'}")
    _, resolved = load_resolved(REPO / "images", "local")
    folder = tmp_path / f"build-{n}"
    (folder / "image").mkdir(parents=True)
    (folder / "image" / "inventory.json").write_text(json.dumps(inventory(n)))
    (folder / "image" / "manifest.json").write_text(json.dumps({"held": ["lib1", "lib2"]}))
    statements: list[str] = []
    try:
        with catalog.transaction() as s:
            build = repo.record_build(s, build_id=f"b-{n}", stack="local", stack_digest="d",
                                      cloud="local")  # fmt: skip
        event.listen(catalog.engine, "before_cursor_execute",
                     lambda *a: statements.append(a[2]))  # fmt: skip
        profile = cProfile.Profile()
        profile.enable()
        path = record_build_sbom(catalog, build.id, f"b-{n}", folder, resolved, "local")
        profile.disable()
    finally:
        catalog.close()
    assert path is not None
    doc = json.loads(path.read_text())
    assert len(doc["components"]) == n + n // 10 + 5  # the kernel and its 4 modules
    return pstats.Stats(profile).total_calls, len(statements)  # type: ignore[attr-defined]


def test_recording_an_sbom_is_linear_in_its_packages(tmp_path: Path) -> None:
    small_calls, small_sql = _record(tmp_path, 500)
    large_calls, large_sql = _record(tmp_path, 2000)
    # four times the packages: at most four times the work (plus a little), where the
    # quadratic recording did sixteen times
    assert large_calls <= 4.4 * small_calls, (small_calls, large_calls)
    assert large_sql == small_sql, (small_sql, large_sql)


@pytest.mark.parametrize("n", [0, 1])
def test_the_smallest_sboms_record_too(tmp_path: Path, n: int) -> None:
    _record(tmp_path, n)
