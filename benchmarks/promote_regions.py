"""Benchmark: promote one image to 16 regions of the local registry in parallel.

Each region's copy takes an injected latency (0.2-0.5 s, one region 0.8 s: the slowest).
A serial promotion would take about the sum of the latencies; a parallel one about the
slowest region. The script prints the wall time of the whole promotion (gate, copies,
recording, pointer flip, retention) against both, and the two ratios.

    .venv/bin/python benchmarks/promote_regions.py [--regions 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path


def _stack(regions: list[str]):
    from imagectl.stacks import load_resolved, stack_digest

    repo = Path(__file__).resolve().parents[1]
    _loaded, resolved = load_resolved(repo / "images", "local")
    local = resolved.stack.clouds.local.model_copy(update={"regions": regions})
    clouds = resolved.stack.clouds.model_copy(update={"local": local})
    stack = resolved.stack.model_copy(update={"clouds": clouds})
    return stack, stack_digest(stack)  # promote() checks images against this digest


def _validated(catalog, provider, tmp: Path, digest: str) -> int:
    from imagectl.catalog import repository as repo

    disk = tmp / f"disk-{uuid.uuid4().hex[:8]}.qcow2"
    disk.write_bytes(os.urandom(1 << 20))
    image = provider.import_image(disk, region="build", stack="local", digest=digest)
    finished = dt.datetime.now(dt.timezone.utc).isoformat()
    with catalog.transaction() as s:
        build = repo.record_build(
            s, build_id=uuid.uuid4().hex, stack="local", stack_digest=digest, cloud="local"
        )
        row = repo.record_image(s, build=build, cloud_image_id=image.image_id, region="build")
        repo.set_state(s, row, "validating", reason="benchmark")
        receipt = {
            "image_id": image.image_id,
            "stack": "local",
            "stack_digest": digest,
            "verdict": "pass",
            "worst_action": "NONE",
            "finished_at": finished,
        }
        repo.record_receipt(
            s,
            row,
            shape="qemu-tcg",
            host="bench",
            profile="boot",
            verdict="pass",
            worst_action="NONE",
            receipt=receipt,
            validator_version="bench",
        )
        repo.set_state(s, row, "validated", reason="benchmark")
        return row.id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="imagectl-bench-"))
    os.environ["IMAGECTL_STATE_DIR"] = str(tmp / "state")
    from imagectl.catalog.db import open_catalog
    from imagectl.clouds.local.provider import LocalProvider
    from imagectl.promotion import promote

    rng = random.Random(args.seed)
    regions = [f"region-{i:02d}" for i in range(args.regions)]
    latency = {r: round(rng.uniform(0.2, 0.5), 3) for r in regions}
    latency[regions[-1]] = 0.8  # the slowest region
    slowest, total = max(latency.values()), sum(latency.values())
    stack, digest = _stack(regions)
    catalog = open_catalog(f"sqlite:///{tmp / 'catalog.db'}")
    provider = LocalProvider(tmp / "registry", latency=latency)

    warm = LocalProvider(tmp / "registry-warm")  # import and first-use costs, not measured
    promote(catalog, warm, stack, _validated(catalog, warm, tmp, digest), retention=False)

    walls: list[float] = []
    for _ in range(args.runs):
        pk = _validated(catalog, provider, tmp, digest)
        started = time.perf_counter()
        result = promote(catalog, provider, stack, pk)
        walls.append(time.perf_counter() - started)
        if result.state != "promoted":
            print(f"promotion failed: {result.state}", file=sys.stderr)
            return 1
    wall = statistics.median(walls)
    print(f"regions:                 {args.regions} (latency 0.2-0.5 s, slowest 0.8 s)")
    print(f"runs:                    {args.runs} (median wall time reported)")
    print(f"wall time:               {wall:.2f} s  (runs: {', '.join(f'{w:.2f}' for w in walls)})")
    print(f"slowest single region:   {slowest:.2f} s")
    print(f"sum of all regions:      {total:.2f} s")
    print(f"wall / slowest:          {wall / slowest:.2f}x  (goal: close to 1)")
    print(f"wall / sum:              {wall / total:.2f}x  (goal: far below 1)")
    catalog.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
