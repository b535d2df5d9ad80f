"""Benchmark: the fleet drift check over 10,000 running instances on three clouds.

The clouds are emulated in memory: ``EmulatedCloud`` implements the provider interface's
``list_instances`` and ``get_pointer`` (seeding moto or the GCP/Azure fakes with 10,000
instances would measure the emulators, not the check). Each stack of the repository gets
instances in every region of every cloud it targets; about 30 % run an older image.
The check under test is the production one (``imagectl.drift.fleet.check``), followed by
the JSON and Markdown renderings of its report.

Prints the wall time, instances per second, tracemalloc's peak and the process's max RSS.
Usage: python benchmarks/drift_fleet.py [--instances N] [--repeat R] [--short]
(``--short``: 1,000 instances, one timed run.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from imagectl.clouds.base import CloudImage, Instance, Provider, ReplicaStatus
from imagectl.drift import fleet, report
from imagectl.drift.findings import DriftReport
from imagectl.stacks import load_resolved, stack_paths
from imagectl.tags import TAG_MANAGED, TAG_STACK

REPO = Path(__file__).resolve().parents[1]
CLOUDS = ("aws", "gcp", "azure")


class EmulatedCloud(Provider):
    """In-memory instances and pointers; only what the fleet check calls."""

    def __init__(self, cloud: str, instances: list[Instance], pointers: dict[tuple[str, str], str]):
        self.cloud = cloud
        self._instances = instances
        self._pointers = pointers
        self.pointer_calls = 0

    def list_instances(self, *, managed_only: bool = True) -> list[Instance]:
        return list(self._instances)

    def get_pointer(self, stack: str, region: str) -> str | None:
        self.pointer_calls += 1
        return self._pointers.get((stack, region))

    def _unused(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("not used by the fleet check")

    query_images = get_image = set_tags = tag_state = launch = wait_reachable = terminate = _unused
    replicate = share = set_pointer = deprecate = delete = _unused

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        raise NotImplementedError


def emulate(total: int, seed: int = 7) -> tuple[list[Any], dict[str, EmulatedCloud]]:
    rng = random.Random(seed)
    stacks = [
        load_resolved(REPO / "images", p.stem)[1] for p in stack_paths(REPO / "images" / "stacks")
    ]
    slots = [
        (s.name, c, r)
        for s in stacks
        for c, cfg in s.stack.clouds.enabled().items()
        if c in CLOUDS
        for r in cfg.regions
    ]
    pointers: dict[str, dict[tuple[str, str], str]] = {c: {} for c in CLOUDS}
    for stack, cloud, region in slots:
        pointers[cloud][(stack, region)] = f"{cloud}-{stack}-{region}-v7"
    instances: dict[str, list[Instance]] = {c: [] for c in CLOUDS}
    launched = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    for i in range(total):
        stack, cloud, region = slots[i % len(slots)]
        version = 7 if rng.random() < 0.7 else rng.choice((5, 6))
        instances[cloud].append(Instance(
            cloud=cloud, region=region, instance_id=f"{cloud}-i-{i:06d}",
            shape="p5.48xlarge", image_id=f"{cloud}-{stack}-{region}-v{version}",
            state="running", tags={TAG_MANAGED: "true", TAG_STACK: stack},
            launched_at=launched,
        ))  # fmt: skip
    providers = {c: EmulatedCloud(c, instances[c], pointers[c]) for c in CLOUDS}
    return stacks, providers


def run_once(stacks: list[Any], providers: dict[str, EmulatedCloud]) -> tuple[float, DriftReport]:
    t0 = time.perf_counter()
    out = DriftReport(sources=("fleet",), as_of=dt.date.today().isoformat())
    fleet.check([s for s in stacks if set(s.stack.clouds.enabled()) & set(CLOUDS)], out,
                providers=dict(providers))  # fmt: skip
    report.render_json(out)
    report.render_markdown(out)
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, help="default 10,000 (--short: 1,000)")
    ap.add_argument("--repeat", type=int, help="default 5 (--short: 1)")
    ap.add_argument(
        "--short", action="store_true", help="CI mode: small sizes, one repeat; finishes in seconds"
    )
    args = ap.parse_args(argv)
    args.instances = args.instances or (1_000 if args.short else 10_000)
    args.repeat = args.repeat or (1 if args.short else 5)
    tracemalloc.start()
    stacks, providers = emulate(args.instances)
    listed, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    run_once(stacks, providers)  # warm-up (imports, caches)
    times = []
    for _ in range(args.repeat):
        elapsed, result = run_once(stacks, providers)
        times.append(elapsed)
    tracemalloc.start()
    _, result = run_once(stacks, providers)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    stale = sum(f.extra.get("stale", 0) for s in result.stacks for f in s.findings
                if f.kind == "fleet-stale")  # fmt: skip
    groups = sum(1 for s in result.stacks for f in s.findings if f.kind == "fleet-summary")
    per_cloud = {c: len(p.list_instances()) for c, p in providers.items()}
    calls = sum(p.pointer_calls for p in providers.values()) // (args.repeat + 2)
    median = statistics.median(times)
    maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"fleet drift over {args.instances} instances "
        f"({', '.join(f'{c} {n}' for c, n in per_cloud.items())})"
    )
    print(
        f"  groups (stack x cloud x region): {groups}; stale instances: {stale} "
        f"({stale / args.instances:.0%}); pointer look-ups per run: {calls}"
    )
    print(
        f"  time: median {median * 1000:.1f} ms, min {min(times) * 1000:.1f} ms "
        f"over {args.repeat} runs ({args.instances / median:,.0f} instances/s)"
    )
    print(
        f"  peak traced memory during one run: {peak / 2**20:.1f} MiB "
        f"({peak / args.instances:.0f} bytes/instance) on top of the listed instances "
        f"({listed / 2**20:.1f} MiB); process max RSS {maxrss_mib:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
