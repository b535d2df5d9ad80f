"""Recording an SBOM is linear in its packages.

It was quadratic: cyclonedx-python-lib's model looked each dependency up in a list and
jsonschema's ``uniqueItems`` compared every pair of components (1,000 packages 6 s, 5,000
over 30 s). Counting Python-level calls (cProfile) cannot see quadratic work inside a C
built-in (a ``list.index`` or ``in`` over a list is one call), so the time is compared:
recording 20,000 packages may take at most eight times what 5,000 take (linear work
takes four times, quadratic sixteen). The time measured is the process's CPU time
(``time.process_time``), which counts work in C built-ins as wall time does but not the
time other processes on a shared machine take from this one; the catalog statements
must not grow at all.
"""

from __future__ import annotations

import json
import time
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


def _record(tmp_path: Path, n: int) -> tuple[float, int]:
    """(CPU seconds, SQL statements) of recording an SBOM of ``n`` packages."""
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
        started = time.process_time()
        path = record_build_sbom(catalog, build.id, f"b-{n}", folder, resolved, "local")
        seconds = time.process_time() - started
    finally:
        catalog.close()
    assert path is not None
    doc = json.loads(path.read_text())
    assert len(doc["components"]) == n + n // 10 + 5  # the kernel and its 4 modules
    return seconds, len(statements)


def test_recording_an_sbom_is_linear_in_its_packages(tmp_path: Path) -> None:
    _record(tmp_path, 200)  # imports and schema loading, outside the comparison
    small, small_sql = _record(tmp_path, 5_000)
    large, large_sql = _record(tmp_path, 20_000)
    # four times the packages: linear work takes about four times as long, the quadratic
    # recording took sixteen; eight leaves room for a noisy machine
    assert large <= 8 * small, f"5,000 packages {small:.2f} s, 20,000 {large:.2f} s"
    assert large_sql == small_sql, (small_sql, large_sql)


@pytest.mark.parametrize("n", [0, 1])
def test_the_smallest_sboms_record_too(tmp_path: Path, n: int) -> None:
    _record(tmp_path, n)
