"""Benchmark: record an image's SBOM (render, schema check, write, catalog) by package count.

The production path: ``record_build_sbom`` reads ``<build folder>/image/inventory.json``
and ``manifest.json`` (a synthetic inventory of N dpkg packages, N/10 Python packages and
the four NVIDIA modules), renders the CycloneDX 1.6 document, checks it against the
schema, writes ``sbom.cdx.json`` and stores it in a SQLite catalog. Prints, per size, the
wall time and the time per 1,000 packages: flat when recording is linear (it was
quadratic: 1,000 packages 6 s, 5,000 over 30 s).

    .venv/bin/python benchmarks/sbom_record.py [--packages 1000,5000,20000]
    .venv/bin/python benchmarks/sbom_record.py --short   # 200 and 1,000 packages
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def inventory(n: int) -> dict:
    return {
        "schema_version": 1,
        "kernel": "6.1.0-28-cloud-amd64",
        "dpkg": [
            {"name": f"lib{i}", "version": f"1.{i}-1", "source": f"src{i // 3}",
             "source_version": f"1.{i}-1", "arch": "amd64" if i % 5 else "all"}
            for i in range(n)
        ],
        "python": [{"name": f"py-pkg{i}", "version": "2.0"} for i in range(n // 10)],
        "kernel_modules": [
            {"name": m, "version": "580.95.05", "vermagic": "6.1.0-28-cloud-amd64 SMP"}
            for m in ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm")
        ],
    }  # fmt: skip


def record(tmp: Path, n: int) -> float:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog
    from imagectl.provenance.record import record_build_sbom
    from imagectl.stacks import load_resolved

    _, resolved = load_resolved(REPO / "images", "local")
    folder = tmp / f"build-{n}"
    (folder / "image").mkdir(parents=True)
    tmp.mkdir(exist_ok=True)
    (folder / "image" / "inventory.json").write_text(json.dumps(inventory(n)))
    (folder / "image" / "manifest.json").write_text(json.dumps({"held": ["lib1"]}))
    catalog = open_catalog(f"sqlite:///{tmp / f'catalog-{n}.db'}")
    try:
        with catalog.transaction() as s:
            build = repo.record_build(s, build_id=f"b-{n}", stack="local", stack_digest="d",
                                      cloud="local")  # fmt: skip
        start = time.perf_counter()
        record_build_sbom(catalog, build.id, f"b-{n}", folder, resolved, "local")
        return time.perf_counter() - start
    finally:
        catalog.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packages", help="comma-separated dpkg package counts (default "
                    "1000,5000,20000; --short: 200,1000)")  # fmt: skip
    ap.add_argument("--short", action="store_true", help="two small sizes, for CI")
    args = ap.parse_args()
    sizes = [int(x) for x in (args.packages or ("200,1000" if args.short else
                                                "1000,5000,20000")).split(",")]  # fmt: skip
    print(f"{'dpkg':>8} {'packages':>9} {'seconds':>8} {'s per 1,000 packages':>21}")
    with tempfile.TemporaryDirectory(prefix="imagectl-sbom-") as tmp:
        record(Path(tmp) / "warm-up", 10)  # imports and the schema, once
        for n in sizes:
            seconds = record(Path(tmp), n)
            packages = n + n // 10  # dpkg and the validator's Python packages
            print(f"{n:>8,} {packages:>9,} {seconds:>8.2f} {seconds / packages * 1000:>21.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
