"""Collective smoke tests on CPU (gloo): algbw/busbw per size, and the validator's overhead.

Prints, for 2 and 4 ranks, nccl-tests style rows for all five collectives, then compares
the validator's all_reduce sweep with a bare torch.distributed loop doing the same
all_reduce sizes and iterations (same spawn-per-rank, same gloo rendezvous):

- end to end: wall time of collective_checks vs the bare script (spawn to exit);
- per operation: the validator's timed loop vs the bare loop's, per size.

Usage: python benchmarks/collectives.py [--ranks 2 4] [--max-bytes 4194304] [--repeat 3]
       python benchmarks/collectives.py --short   # 2 ranks, up to 64 KiB, best of 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types

from imagectl.validators.collectives import collective_checks
from imagectl.validators.collectives.arithmetic import OPS, element_count, size_sweep
from imagectl.validators.collectives.launch import free_port
from imagectl.validators.collectives.profiles import sweep_for

BARE = r"""
import os, sys, time, json
import torch, torch.distributed as dist
sizes, warmup, iters = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
n, out = dist.get_world_size(), {}
for size in sizes:
    x = torch.zeros(max(size // 4, 1))
    for _ in range(warmup):
        dist.all_reduce(x)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    out[size] = (time.perf_counter() - t0) / iters * 1e6
dist.barrier()
dist.destroy_process_group()
if int(os.environ["RANK"]) == 0:
    print(json.dumps(out))
"""


def bare_all_reduce(nranks: int, sizes: list[int], warmup: int, iters: int) -> tuple[float, dict]:
    import json

    port = str(free_port())
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(nranks))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("PYTHONWARNINGS", "ignore")
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BARE, json.dumps(sizes), str(warmup), str(iters)],
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for r in range(nranks)
    ]
    outs = [p.communicate()[0] for p in procs]
    wall = time.perf_counter() - t0
    per_size = {int(k): v for k, v in json.loads(outs[0].strip().splitlines()[-1]).items()}
    return wall, per_size


def table(nranks: int, max_bytes: int) -> None:
    sizes = size_sweep(4096, max_bytes, 4)
    t0 = time.perf_counter()
    checks = collective_checks(
        types.SimpleNamespace(), device="cpu", profile="full", nodes=None, ranks=nranks, sizes=sizes
    )
    wall = time.perf_counter() - t0
    print(f"\n## {nranks} ranks, gloo on CPU, all five collectives ({wall:.1f} s wall)")
    print(f"{'op':<15}{'size (B)':>12}{'time (us)':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}  ok")
    for check in checks:
        if check.id.removeprefix("collective.") not in OPS:
            continue
        for row in check.details.get("sizes", []):
            print(
                f"{check.id.removeprefix('collective.'):<15}{row['bytes']:>12}{row['time_us']:>12.1f}"
                f"{row['algbw_gbps']:>12.4f}{row['busbw_gbps']:>12.4f}  {row['ok']}"
            )
        if check.outcome.value != "pass":
            print(f"  {check.id}: {check.outcome.value}: {check.message}")


def validator_all_reduce(nranks: int, sizes: list[int]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    checks = collective_checks(
        types.SimpleNamespace(),
        device="cpu",
        profile="full",
        nodes=None,
        ranks=nranks,
        ops=["all_reduce"],
        sizes=sizes,
    )
    wall = time.perf_counter() - t0
    rows = {
        r["bytes"]: r for c in checks if c.id == "collective.all_reduce" for r in c.details["sizes"]
    }
    return wall, rows


def overhead(nranks: int, max_bytes: int, repeat: int) -> None:
    """Best of ``repeat`` runs each: the minimum filters out a busy machine's noise."""
    sweep = sweep_for("cpu", "full")
    sizes = size_sweep(4096, max_bytes, 4)
    validator_wall, bare_wall = float("inf"), float("inf")
    rows: dict[int, dict] = {}
    bare: dict[int, float] = {}
    for _ in range(repeat):
        wall, got = validator_all_reduce(nranks, sizes)
        validator_wall = min(validator_wall, wall)
        for size, row in got.items():
            if size not in rows or row["time_us"] < rows[size]["time_us"]:
                rows[size] = row
        wall, times = bare_all_reduce(nranks, sizes, sweep.warmup, sweep.iters)
        bare_wall = min(bare_wall, wall)
        for size, t_us in times.items():
            bare[size] = min(bare.get(size, float("inf")), t_us)
    print(
        f"\n## Overhead, all_reduce, {nranks} ranks ({sweep.warmup} warm-up + {sweep.iters} "
        f"timed, best of {repeat})"
    )
    print(
        f"end to end: validator {validator_wall:.2f} s, bare loop {bare_wall:.2f} s, "
        f"ratio {validator_wall / bare_wall:.2f}"
    )
    print(f"{'size (B)':>12}{'validator us':>14}{'bare us':>12}{'ratio':>8}")
    for size in sizes:
        count_bytes = element_count(size, nranks, "all_reduce") * 4
        v = rows.get(count_bytes, {}).get("time_us")
        b = bare.get(size)
        if v and b:
            print(f"{count_bytes:>12}{v:>14.1f}{b:>12.1f}{v / b:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", help="default 2 4 (--short: 2)")
    parser.add_argument("--max-bytes", type=int, help="default 4194304 (--short: 65536)")
    parser.add_argument("--repeat", type=int, help="default 3 (--short: 1)")
    parser.add_argument(
        "--short", action="store_true", help="CI mode: small sizes, one repeat; finishes in seconds"
    )
    args = parser.parse_args()
    ranks = args.ranks or ([2] if args.short else [2, 4])
    max_bytes = args.max_bytes or ((64 << 10) if args.short else (4 << 20))
    repeat = args.repeat or (1 if args.short else 3)
    for nranks in ranks:
        table(nranks, max_bytes)
    for nranks in ranks:
        overhead(nranks, max_bytes, repeat)


if __name__ == "__main__":
    main()
