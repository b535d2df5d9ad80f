"""Boot readiness: right after boot the NVLink fabric may still be training; a live run
waits for it (once per run) instead of failing a host that is merely early."""

from __future__ import annotations

import copy
from typing import Any

import pynvml
from validator_support import SNAPSHOTS, expect_file

from imagectl.validators.checks import REGISTRY
from imagectl.validators.context import NamedCalls
from imagectl.validators.expectations import from_file
from imagectl.validators.nvml import ReplayNvml
from imagectl.validators.results import Outcome
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context
from imagectl.validators.snapshot import load_snapshot


class TrainingFabric(ReplayNvml):
    """A host whose fabric completes after ``ready_after`` reads (as on a fresh boot)."""

    kind = "live"  # behave as the live backend does: readiness waits apply

    def __init__(self, nvml: dict[str, Any], ready_after: int | None):
        super().__init__(nvml)
        self.ready_after = ready_after
        self.reads = 0

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, info: Any) -> int:
        self.reads += 1
        done = self.ready_after is not None and self.reads > self.ready_after
        info.state = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED if done else 2
        info.status = pynvml.NVML_SUCCESS
        return pynvml.NVML_SUCCESS


def _run(ready_after: int | None, wait_s: float = 10.0) -> list[Any]:
    snap = copy.deepcopy(load_snapshot(SNAPSHOTS / "healthy/h100-sxm-8x.json"))
    ctx = build_context(Options(expect=from_file(expect_file("h100-sxm-8x")), snapshot=snap))
    ctx.nvml = NamedCalls(TrainingFabric(snap["nvml"], ready_after))
    run_checks([REGISTRY["nvml.init"]], ctx)
    if wait_s != 10.0:
        import time

        ctx.fabric_deadline = time.monotonic() + wait_s
    return run_checks([REGISTRY["gpu.fabric.state"]], ctx)


def test_a_fabric_still_training_is_waited_for() -> None:
    results = _run(ready_after=3)
    assert [r.outcome for r in results] == [Outcome.PASS] * 8
    assert results[0].details["waited_s"] > 0


def test_a_fabric_that_never_completes_fails_after_one_shared_wait() -> None:
    results = _run(ready_after=None, wait_s=1.5)
    assert [r.outcome for r in results] == [Outcome.FAIL] * 8
    # the wait is shared, not per GPU: one wait is 1.5 s, eight would be 12 s
    assert sum(r.duration_s for r in results) < 8.0
    assert results[0].measured == "IN_PROGRESS"
