"""Boot-profile wall time on the replayed 8-GPU snapshots, and the time of each check.

    .venv/bin/python benchmarks/validate_boot.py [--repeat N] [--short]

Replays the healthy 8x H100, 8x A100 and 8x H200 snapshots through ``validate`` (the same
code as live; NVML answers from memory, so this measures the validator's own overhead:
threads, deadlines, parsing, the receipt) and prints the wall time per snapshot against the
30 s budget of the boot profile, then the per-check time summed over GPUs, slowest first.
On a real host, NVML calls add their own latency (captured as ``duration_s`` per check in
the receipt). ``--short``: one run per snapshot.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

from imagectl.validators.budgets import BOOT_S
from imagectl.validators.expectations import from_file
from imagectl.validators.session import Options, validate
from imagectl.validators.snapshot import load_snapshot

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "tests" / "snapshots"
BASES = ("h100-sxm-8x", "a100-sxm-80gb-8x", "h200-8x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, help="runs per snapshot (default 5; --short 1)")
    parser.add_argument(
        "--short", action="store_true", help="CI mode: small sizes, one repeat; finishes in seconds"
    )
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.short else 5)
    budget = BOOT_S
    per_check: dict[str, list[float]] = defaultdict(list)
    print(f"{'snapshot':<22} {'checks':>6} {'median s':>9} {'max s':>7} {'budget used':>12}")
    for base in BASES:
        snap = load_snapshot(LIB / "healthy" / f"{base}.json")
        expect = from_file(LIB / "expect" / f"{base}.json")
        walls = []
        receipt = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            receipt = validate(Options(profile="boot", expect=expect, snapshot=snap))
            walls.append(time.perf_counter() - t0)
        assert receipt is not None and receipt.verdict == "pass"
        totals: dict[str, float] = defaultdict(float)
        for c in receipt.checks:
            totals[c.id] += c.duration_s
        for cid, t in totals.items():
            per_check[cid].append(t)
        med = statistics.median(walls)
        print(
            f"{base:<22} {len(receipt.checks):>6} {med:>9.3f} {max(walls):>7.3f} "
            f"{med / budget:>11.2%}"
        )
    print("\nper check (summed over the 8 GPUs, median over snapshots), slowest first:")
    rows = sorted(per_check.items(), key=lambda kv: -statistics.median(kv[1]))
    for cid, ts in rows:
        print(f"  {cid:<34} {statistics.median(ts) * 1000:8.2f} ms")


if __name__ == "__main__":
    main()
