"""Benchmark: promote one image to 16 regions of the local registry in parallel.

Each region's copy takes an injected latency (0.2-0.5 s, one region 0.8 s: the slowest).
A serial promotion would take about the sum of the latencies; a parallel one about the
slowest region. The script prints the wall time of the whole promotion (gate, copies,
recording, pointer flip, retention) against both, and the two ratios.

    .venv/bin/python benchmarks/promote_regions.py [--regions 16] [--runs 3]
    .venv/bin/python benchmarks/promote_regions.py --short   # 4 regions, 1 run
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


def _receipt(image_id: str, digest: str):
    """A passing boot-profile receipt for ``image_id``, as the validator writes one."""
    from imagectl.validators.receipt import Receipt
    from imagectl.validators.results import Action, CheckResult, Outcome, Severity

    finished = dt.datetime.now(dt.timezone.utc)
    check = CheckResult(
        id="sw.driver.version",
        title="NVIDIA driver version matches the pin",
        severity=Severity.CRITICAL,
        outcome=Outcome.PASS,
    )
    return Receipt(
        image_id=image_id,
        stack="local",
        stack_digest=digest,
        validator_version="bench",
        profile="boot",
        started_at=(finished - dt.timedelta(seconds=30)).isoformat(),
        finished_at=finished.isoformat(),
        duration_s=30.0,
        mode="live",
        host={"hostname": "bench"},
        expectations={},
        gpus=[],
        checks=[check],
        summary={"pass": 1},
        verdict="pass",
        worst_action=Action.NONE,
    )


def _validated(catalog, provider, tmp: Path, digest: str) -> int:
    """A validated image in the registry's build region, with its signed attestation (the
    promotion verifies it), as the validation stage leaves one."""
    from imagectl.catalog import repository as repo
    from imagectl.provenance.attest import attest_image

    disk = tmp / f"disk-{uuid.uuid4().hex[:8]}.qcow2"
    disk.write_bytes(os.urandom(1 << 20))
    image = provider.import_image(disk, region="build", stack="local", digest=digest)
    with catalog.transaction() as s:
        build = repo.record_build(
            s, build_id=uuid.uuid4().hex, stack="local", stack_digest=digest, cloud="local"
        )
        row = repo.record_image(s, build=build, cloud_image_id=image.image_id, region="build")
        repo.set_state(s, row, "validating", reason="benchmark")
        repo.record_receipt(
            s, row, shape="qemu-tcg", host="bench", receipt=_receipt(image.image_id, digest)
        )
        repo.set_state(s, row, "validated", reason="benchmark")
        pk = row.id
    attest_image(catalog, pk, provider)
    return pk


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, help="default 16 (--short: 4)")
    parser.add_argument("--runs", type=int, help="default 3 (--short: 1)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--short", action="store_true", help="CI mode: small sizes, one repeat; finishes in seconds"
    )
    args = parser.parse_args(argv)
    args.regions = args.regions or (4 if args.short else 16)
    args.runs = args.runs or (1 if args.short else 3)

    tmp = Path(tempfile.mkdtemp(prefix="imagectl-bench-"))
    os.environ["IMAGECTL_STATE_DIR"] = str(tmp / "state")
    from imagectl.catalog.db import open_catalog
    from imagectl.clouds.local.provider import LocalProvider
    from imagectl.clouds.local.spec import LocalOptions
    from imagectl.promotion import promote
    from imagectl.provenance.keys import ensure_local_key, local_public

    # the benchmark's own state key (as `imagectl attest --new-key`), and only it trusted
    ensure_local_key()
    os.environ["IMAGECTL_ATTESTATION_TRUST"] = str(local_public())
    rng = random.Random(args.seed)
    regions = [f"region-{i:02d}" for i in range(args.regions)]
    latency = {r: round(rng.uniform(0.2, 0.5), 3) for r in regions}
    latency[regions[-1]] = 0.8  # the slowest region
    slowest, total = max(latency.values()), sum(latency.values())
    stack, digest = _stack(regions)
    catalog = open_catalog(f"sqlite:///{tmp / 'catalog.db'}")
    provider = LocalProvider(LocalOptions(root=tmp / "registry", latency=latency))

    warm = LocalProvider(
        LocalOptions(root=tmp / "registry-warm")
    )  # import and first-use costs, not measured
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
