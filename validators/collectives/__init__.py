"""Multi-GPU collective smoke tests: torch.distributed over NCCL (gloo with ``--device cpu``).

``collective_checks`` runs all_reduce, all_gather, reduce_scatter, broadcast and all_to_all
over a size sweep, one process per GPU (or per CPU rank), every rank checking every value;
busbw as nccl-tests computes it, gated by ``validators/data/floors.yaml`` at large sizes;
hard per-collective timeouts enforced by the parent with a per-rank report. With ``nodes``
(a hostfile, see ``hostfile.py``) the same workers run across hosts through torchrun's c10d
rendezvous; run the same command on every host of the hostfile.

Files: arithmetic.py (busbw), patterns.py (values), worker.py (one rank), faults.py (the
test hook), events.py + launch.py (start, watch, stop), verdicts.py (results), nccl_lib.py
(which NCCL ran), profiles.py (sweeps and timeouts per profile).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from imagectl.validators.collectives import nccl_lib
from imagectl.validators.collectives.arithmetic import OPS
from imagectl.validators.collectives.hostfile import parse_hostfile
from imagectl.validators.collectives.launch import Plan, RunReport, run_collectives
from imagectl.validators.collectives.profiles import sweep_for
from imagectl.validators.collectives.verdicts import build_checks
from imagectl.validators.compute.floors import floors_for
from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

__all__ = ["collective_checks"]

CPU_RANKS_ENV = "IMAGECTL_CPU_RANKS"


declare(
    "collective.nccl_version", "The NCCL that ran is the image's pinned NCCL",
    runs=Runs.RANKS, action=Action.BLOCK_IMAGE,
)  # fmt: skip


def _skip(check_id: str, message: str) -> CheckResult:
    return check_result(
        id=check_id,
        severity=Severity.INFO,
        outcome=Outcome.SKIP,
        message=message,
    )


def _cannot_run(message: str) -> list[CheckResult]:
    """The one result of a sweep that cannot start on this host: the image is blocked."""
    return [
        check_result(
            id="collective.rendezvous",
            severity=Severity.CRITICAL,
            outcome=Outcome.ERROR,
            action=Action.BLOCK_IMAGE,
            message=message,
        )
    ]


def _resolve_device(device: str, expect: object) -> str:
    """``auto``: CUDA where the expectations name GPUs, else the CPU (never a silent fallback
    from a GPU host to the CPU)."""
    if device in ("cpu", "cuda"):
        return device
    names_gpus = getattr(expect, "names_gpus", None)
    return "cuda" if names_gpus else "cpu"


def collective_checks(
    expect: Any,
    *,
    device: str,
    profile: str,
    nodes: str | None,
    ranks: int | None = None,
    ops: list[str] | None = None,
    sizes: list[int] | None = None,
    join_timeout_s: float | None = None,
    op_timeout_s: float | None = None,
    local_addr: str | None = None,
    env: dict[str, str] | None = None,
) -> list[CheckResult]:
    """Run the collective sweep and judge it.

    ``ranks`` (CPU only; default ``$IMAGECTL_CPU_RANKS`` or 2), ``ops``, ``sizes`` and the
    timeouts override the profile's defaults (tests and the benchmark use them).
    ``local_addr`` (multi-node): this node's address in the hostfile; ``env``: settings
    every rank gets (the fabric's NCCL environment).
    """
    hostfile = parse_hostfile(nodes) if nodes else None  # bad input fails before any work
    if importlib.util.find_spec("torch") is None:
        return _cannot_run(
            "torch is not installed: the profile needs it (pip install 'imagectl[torch]')"
        )
    device = _resolve_device(device, expect)
    if device == "cuda":
        import torch

        if torch.version.cuda is None or not torch.cuda.is_available():
            # each rank would die in torch.cuda.set_device (a CPU build has no _cuda_*)
            why = ("is a CPU build" if torch.version.cuda is None
                   else f"(CUDA {torch.version.cuda}) sees no CUDA device")  # fmt: skip
            return _cannot_run(
                f"--device cuda, but torch {torch.__version__} {why}: install the stack's "
                "CUDA torch (--toolkit-wheelhouse) or run with --device cpu"
            )
        nranks = hostfile.slots if hostfile and hostfile.slots else torch.cuda.device_count()
    else:
        nranks = ranks or (hostfile.slots if hostfile and hostfile.slots else 0)
        nranks = nranks or int(os.environ.get(CPU_RANKS_ENV, "2"))
    world = nranks * (hostfile.nnodes if hostfile else 1)
    if world < 2:
        return [_skip("collective.rendezvous", f"{world} rank(s): a collective needs at least 2")]
    sweep = sweep_for(device, profile)
    chosen_ops = list(ops or OPS)
    plan = Plan(
        device=device,
        ops=chosen_ops,
        sizes={op: list(sizes) if sizes else sweep.sizes(op) for op in chosen_ops},
        nranks=nranks,
        warmup=sweep.warmup,
        iters=sweep.iters,
        join_timeout_s=join_timeout_s or sweep.join_timeout_s,
        op_timeout_s=op_timeout_s or sweep.op_timeout_s,
        nodes=hostfile,
        env=dict(env or {}),
        local_addr=local_addr,
    )
    nccl = _nccl_plan(expect, device)
    if nccl.get("preload"):
        preload = os.environ.get("LD_PRELOAD", "")
        plan.env["LD_PRELOAD"] = f"{nccl['preload']}:{preload}" if preload else nccl["preload"]
    report = run_collectives(plan)
    gpu = getattr(expect, "gpu", None)
    floors = floors_for(gpu, getattr(expect, "shape", None)) if device == "cuda" else {}
    checks = build_checks(report, device=device, floors=floors, gpu=gpu)
    checks.append(_nccl_check(nccl, report, device))
    return checks


def _nccl_plan(expect: object, device: str) -> dict[str, Any]:
    pinned = nccl_lib.pinned_version(getattr(expect, "nccl", None))
    system = nccl_lib.find_system_library()
    info: dict[str, Any] = {
        "pinned": pinned,
        "system_library": system,
        "system_version": nccl_lib.library_version(system) if system else None,
        "torch_bundled": nccl_lib.bundled_version(),
    }
    if device == "cuda" and pinned and system:
        info["preload"] = system
    return info


def _nccl_check(info: dict[str, object], report: RunReport, device: str) -> CheckResult:
    ran = sorted({s.nccl_version for s in report.ranks.values() if s.nccl_version})
    details = dict(info, ran=ran)
    common: dict[str, object] = {
        "id": "collective.nccl_version",
        "expected": info["pinned"],
        "details": details,
    }
    if device == "cpu":
        return check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.SKIP,
            message="gloo backend on cpu: NCCL not exercised",
        )
    pinned = info["pinned"]
    if pinned and not info["system_library"]:
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.BLOCK_IMAGE,
            message=f"the stack pins NCCL {pinned} but no libnccl.so.2 is installed",
        )
    if pinned and info["system_version"] and info["system_version"] != pinned:
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.BLOCK_IMAGE,
            measured=info["system_version"],
            message=f"system libnccl is {info['system_version']}, the stack pins {pinned}",
        )
    if not ran:
        return check_result(
            **common,
            severity=Severity.WARNING,
            outcome=Outcome.SKIP,
            message="no rank joined, so no NCCL version was reported",
        )
    measured = ran[0] if len(ran) == 1 else ran
    if pinned and ran != [pinned]:
        return check_result(
            **common,
            severity=Severity.WARNING,
            outcome=Outcome.WARN,
            measured=measured,
            message=(
                f"collectives ran NCCL {', '.join(ran)}, not the image's pinned {pinned} "
                f"(torch bundles {info['torch_bundled']}); preloading {info['system_library']} "
                "did not take"
            ),
        )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        measured=measured,
        message=(
            f"collectives ran NCCL {measured}"
            + (f" (the image's {info['system_library']}, preloaded)" if info.get("preload") else "")
            + (f"; torch bundles {info['torch_bundled']}" if info["torch_bundled"] else "")
        ),
    )
