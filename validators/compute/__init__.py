"""CUDA smoke tests per GPU: init, properties, GEMM, copy bandwidths, hardware under load.

``smoke_checks`` runs on ``cuda`` (the real thing) or ``cpu`` (the same code on the host's
CPU: GEMM correctness and memory copy for real, floors not applicable, CUDA-only checks
skipped with the reason). torch is optional and imported here only when called.

Files: cuda_init.py (cuInit in fresh processes), properties.py (shape), gemm.py (GEMM
correctness, consistency, TFLOP/s), bandwidth.py (copies), load.py (NVML sampling under
GEMM load), checks.py (results), floors.py (the floors table), profiles.py (durations).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from imagectl.validators.compute import bandwidth, gemm, load, recorded
from imagectl.validators.compute.checks import (
    consistency_check,
    floor_check,
    gemm_checks,
    p2p_check,
)
from imagectl.validators.compute.cuda_init import init_check, probe
from imagectl.validators.compute.floors import floors_for
from imagectl.validators.compute.profiles import profile_for
from imagectl.validators.compute.properties import properties_check
from imagectl.validators.compute.readiness import TOOLKIT_ID
from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.registry import check_result
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

if TYPE_CHECKING:
    from torch import device as TorchDevice

    from imagectl.validators.compute.profiles import SmokeProfile
    from imagectl.validators.expectations import Expectations

__all__ = ["smoke_checks"]


def _result(check_id: str, outcome: Outcome, message: str, **kw: object) -> CheckResult:
    severity = Severity.WARNING if outcome is Outcome.ERROR else Severity.INFO
    return check_result(
        id=check_id,
        severity=severity,
        outcome=outcome,
        message=message,
        **kw,
    )


def _guard(
    check_id: str,
    fn: Callable[..., CheckResult | list[CheckResult]],
    *args: object,
    **kw: object,
) -> list[CheckResult]:
    """Run one stage; an exception inside it is an error result, never a pass."""
    try:
        out = fn(*args, **kw)
        return out if isinstance(out, list) else [out]
    except Exception as exc:
        return [_result(check_id, Outcome.ERROR, f"{type(exc).__name__}: {exc}")]


def smoke_checks(
    expect: Expectations,
    *,
    device: str,
    profile: str,
    nvml: NvmlBackend | None,
    init: CheckResult | None = None,
) -> list[CheckResult]:
    """The smoke tests on ``device`` (cuda or cpu; the session resolves ``auto``: CUDA on a
    host whose expectations name GPUs, never a silent fallback to the CPU). ``init`` is the
    session's ``cuda.init`` result when it already probed cuInit (readiness)."""
    if importlib.util.find_spec("torch") is None:
        return [
            _result(
                TOOLKIT_ID,
                Outcome.ERROR,
                "torch is not installed: the profile needs it (pip install 'imagectl[torch]')",
                action=Action.BLOCK_IMAGE,
            )
        ]
    import torch

    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be cuda or cpu, not {device!r}")
    prof = profile_for(device, profile)
    gpu, shape = getattr(expect, "gpu", None), getattr(expect, "shape", None)
    want_count = getattr(expect, "gpu_count", 0) or 0
    floors = floors_for(gpu, shape) if device == "cuda" else {}
    checks: list[CheckResult] = []
    if device == "cuda":
        if init is None:
            init = init_check(probe(prof.cuinit_tries), want_count)
            checks.append(init)
        if init.outcome is Outcome.FAIL and init.measured is None:
            return checks
        if not torch.cuda.is_available():
            why = "cuInit succeeded but torch cannot use CUDA (torch.cuda.is_available() is False)"
            return [
                *checks,
                _result("cuda.device_properties", Outcome.ERROR, why, action=Action.BLOCK_IMAGE),
            ]
        devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
        if not devices:
            why = "cuInit succeeded but torch sees no CUDA device (CUDA_VISIBLE_DEVICES?)"
            return [*checks, _result("cuda.device_properties", Outcome.ERROR, why)]
        checks += _guard(
            "cuda.device_properties", lambda: properties_check(_props(torch, devices), expect)
        )
    else:
        devices = [torch.device("cpu")]
        reason = "device cpu: no CUDA driver involved"
        checks.append(_result("cuda.init", Outcome.SKIP, reason))
        checks.append(_result("cuda.device_properties", Outcome.SKIP, reason))

    def gpu_of(index: int) -> int | None:
        return index if device == "cuda" else None

    consistency: dict[str, Any] = {}
    for dtype in gemm.DTYPES:
        runs: list[gemm.GemmRun] = []

        def stage(dtype: str = dtype, runs: list[gemm.GemmRun] = runs) -> list[CheckResult]:
            runs += gemm.run_gemm(
                torch,
                devices,
                dtype,
                check_n=prof.gemm_check_n,
                perf_n=prof.gemm_perf_n,
                iters=prof.gemm_iters,
            )
            consistency[dtype] = gemm.consistency(torch, runs)
            return gemm_checks(runs, floors, device, gpu_of)

        checks += _guard(f"cuda.gemm.{dtype}", stage)
    checks.append(consistency_check(consistency, len(devices), gpu_of))
    for i, dev in enumerate(devices):
        checks += _guard(
            "cuda.hbm_bandwidth",
            lambda dev=dev, i=i: floor_check(
                check_id="cuda.hbm_bandwidth",
                measured=bandwidth.device_copy_gbps(torch, dev, prof.copy_bytes, prof.copy_iters),
                unit="GB/s",
                floor=floors.get("hbm_gbps"),
                device=device,
                gpu=gpu_of(i),
                details={"bytes": prof.copy_bytes},
            ),
        )
    if device == "cuda":
        for i, dev in enumerate(devices):
            for direction in ("h2d", "d2h"):
                checks += _guard(
                    f"cuda.{direction}_bandwidth",
                    lambda dev=dev, i=i, direction=direction: floor_check(
                        check_id=f"cuda.{direction}_bandwidth",
                        measured=bandwidth.host_copy_gbps(
                            torch, dev, prof.host_copy_bytes, prof.copy_iters, direction
                        ),
                        unit="GB/s",
                        floor=floors.get(f"{direction}_gbps"),
                        device=device,
                        gpu=i,
                        details={"bytes": prof.host_copy_bytes},
                    ),
                )
        if len(devices) > 1:
            info = getattr(expect, "hardware", None)
            checks += _guard(
                "cuda.p2p_bandwidth",
                lambda: p2p_check(
                    bandwidth.peer_matrix(torch, len(devices), prof.p2p_bytes, prof.copy_iters),
                    floors,
                    bool(info and info.nvswitch),
                ),
            )
        else:
            checks.append(_result("cuda.p2p_bandwidth", Outcome.SKIP, "one GPU: no pair"))
    else:
        for check_id in ("cuda.h2d_bandwidth", "cuda.d2h_bandwidth", "cuda.p2p_bandwidth"):
            checks.append(
                _result(check_id, Outcome.SKIP, "device cpu: no host/device or peer copies")
            )
    checks += _guard(
        "load.clock_events", _under_load, torch, devices, nvml, prof, expect, want_count
    )
    if device == "cuda":
        torch.cuda.empty_cache()  # leave the memory to the collective workers that follow
    return checks


def _props(torch: ModuleType, devices: list[TorchDevice]) -> list[dict[str, object]]:
    out = []
    for i, dev in enumerate(devices):
        p = torch.cuda.get_device_properties(dev)
        out.append(
            {
                "index": i,
                "name": p.name,
                "total_memory": p.total_memory,
                "sm_count": p.multi_processor_count,
                "capability": f"{p.major}.{p.minor}",
            }
        )
    return out


def _under_load(
    torch: ModuleType,
    devices: list[TorchDevice],
    nvml: NvmlBackend | None,
    prof: SmokeProfile,
    expect: Expectations,
    want_count: int,
) -> list[CheckResult]:
    if nvml is None:
        return [
            _result(cid, Outcome.SKIP, "no NVML backend: hardware not sampled under load")
            for cid in recorded.LOAD_IDS
        ]
    if devices[0].type == "cuda":
        indices = list(range(len(devices)))
    else:  # CPU load with an NVML backend (a replay): sample the GPUs it describes
        indices = list(range(want_count or int(nvml.nvmlDeviceGetCount())))
    sampler = load.Sampler(nvml, indices, interval_s=prof.sample_interval_s)
    with sampler:
        load.gemm_load(torch, devices, prof.load_s, prof.gemm_perf_n)
    return recorded.judge_recording(
        sampler.recording(prof.load_s),
        nvml,
        getattr(expect, "gpu", None),
        getattr(expect, "shape", None),
    )
