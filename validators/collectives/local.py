"""The collectives over this host's own GPUs, as a benchmark: ``python -m
imagectl.validators.collectives.local --device cuda|cpu [--profile quick] [-o FILE]``.

The validator's collective smoke test needs two ranks (a collective of one moves nothing);
a host with one GPU still has what a single rank can check: NCCL initialises on it, a
communicator of one forms, every value comes back right at every size, and which NCCL ran.
This runs the same workers, sweep and verdicts as the validator over every local GPU (one
or more; ``--ranks`` on the CPU, gloo) and prints per op and size the algorithm and bus
bandwidth (nccl-tests' arithmetic; busbw is 0 for one rank by definition) as JSON. The GPU
check (``benchmarks/gpu_check.py``) records it beside the receipt.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from imagectl.validators.collectives.arithmetic import OPS
from imagectl.validators.collectives.launch import Plan, run_collectives
from imagectl.validators.collectives.profiles import sweep_for
from imagectl.validators.collectives.verdicts import build_checks


def local_ranks(device: str, ranks: int | None) -> int:
    if device == "cuda":
        import torch

        return int(torch.cuda.device_count())
    return ranks or 2


def run_local(device: str, profile: str, ranks: int | None = None) -> dict[str, object]:
    """Every collective over the local ranks; the validator's verdicts and the figures."""
    nranks = local_ranks(device, ranks)
    if nranks < 1:
        return {"device": device, "ranks": 0, "error": "no CUDA device visible to torch"}
    sweep = sweep_for(device, profile)
    plan = Plan(
        device=device,
        ops=list(OPS),
        sizes={op: sweep.sizes(op) for op in OPS},
        nranks=nranks,
        warmup=sweep.warmup,
        iters=sweep.iters,
        join_timeout_s=sweep.join_timeout_s,
        op_timeout_s=sweep.op_timeout_s,
    )
    report = run_collectives(plan)
    checks = [
        c.model_dump(mode="json") for c in build_checks(report, device=device, floors={}, gpu=None)
    ]
    return {
        "device": device,
        "profile": profile,
        "ranks": report.world_size,
        "nccl": sorted({s.nccl_version for s in report.ranks.values() if s.nccl_version}),
        "backend": sorted({s.backend for s in report.ranks.values() if s.backend}),
        "duration_s": round(report.duration_s, 3),
        "failure": None if report.failure is None else report.failure.message,
        "checks": checks,
    }


def passed(result: dict[str, Any]) -> bool:
    return bool(result.get("checks")) and all(
        c["outcome"] not in ("fail", "error") for c in result["checks"]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m imagectl.validators.collectives.local")
    parser.add_argument("--device", choices=["cuda", "cpu"], required=True)
    parser.add_argument("--profile", choices=["quick", "full", "burn"], default="quick")
    parser.add_argument("--ranks", type=int, help="CPU ranks (gloo); default 2")
    parser.add_argument("-o", "--output", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = run_local(args.device, args.profile, args.ranks)
    text = json.dumps(result, indent=2) + "\n"
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0 if passed(result) else 1


if __name__ == "__main__":
    sys.exit(main())
