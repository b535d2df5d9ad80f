"""Hard per-check deadlines, exceptions and unsupported NVML calls, on the real runner and
the real checks (a replay backend whose call hangs stands in for a wedged driver)."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pynvml
from validator_support import SNAPSHOTS, expect_file

from imagectl.validators.checks import specs_for
from imagectl.validators.checks.base import Spec
from imagectl.validators.expectations import from_file
from imagectl.validators.findings import Finding, ok
from imagectl.validators.nvml import ReplayNvml
from imagectl.validators.results import Action, Outcome, Severity
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context
from imagectl.validators.snapshot import load_snapshot

NEVER = threading.Event()


def _ctx() -> Any:
    return build_context(
        Options(
            expect=from_file(expect_file("h100-sxm-8x")),
            snapshot=load_snapshot(SNAPSHOTS / "healthy/h100-sxm-8x.json"),
        )
    )


def _spec(fn: Any, *, timeout_s: float = 0.2, needs_nvml: bool = False) -> Spec:
    return Spec(
        "test.check",
        "a test check",
        Severity.CRITICAL,
        fn,
        False,
        needs_nvml,
        frozenset({"boot"}),
        timeout_s,
        Action.REBOOT,
    )


def test_a_hung_check_fails_within_its_deadline_and_the_run_goes_on() -> None:
    def hang(ctx: Any) -> Finding:
        NEVER.wait()
        return ok()

    def fine(ctx: Any) -> Finding:
        return ok("ran")

    ctx = _ctx()
    started = time.perf_counter()
    results = run_checks([_spec(hang), dataclasses.replace(_spec(fine), id="test.after")], ctx)
    # The hung check never returns: any finish proves the deadline (a generous bound, not a
    # timing assertion: a loaded CI runner is slow, never infinitely).
    assert time.perf_counter() - started < 60.0
    hung, after = results
    assert hung.outcome == Outcome.FAIL and hung.action == Action.REBOOT
    assert "timed out" in hung.message
    assert after.outcome == Outcome.PASS and after.message == "ran"


def test_an_exception_is_error_never_pass() -> None:
    def boom(ctx: Any) -> Finding:
        raise KeyError("missing")

    (r,) = run_checks([_spec(boom)], _ctx())
    assert r.outcome == Outcome.ERROR and r.failed
    assert "KeyError" in r.message


def test_unsupported_nvml_call_is_skip_with_the_reason() -> None:
    def call(ctx: Any) -> Finding:
        raise pynvml.NVMLError_NotSupported()

    def lost(ctx: Any) -> Finding:
        raise pynvml.NVMLError_GpuIsLost()

    (s,) = run_checks([_spec(call)], _ctx())
    assert s.outcome == Outcome.SKIP and "Not Supported" in s.message
    (lost_r,) = run_checks([_spec(lost)], _ctx())
    assert lost_r.outcome == Outcome.FAIL and lost_r.action == Action.REBOOT


class HangingReplay(ReplayNvml):
    """NVML whose temperature call never returns, as a wedged driver does."""

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        NEVER.wait()
        return 0


def test_a_wedged_nvml_fails_the_remaining_gpu_checks_fast() -> None:
    ctx = _ctx()
    snap = load_snapshot(SNAPSHOTS / "healthy/h100-sxm-8x.json")
    from imagectl.validators.context import NamedCalls

    ctx.nvml = NamedCalls(HangingReplay(snap["nvml"]))
    specs = [dataclasses.replace(s, timeout_s=min(s.timeout_s, 0.3)) for s in specs_for("boot")]
    results = run_checks(specs, ctx)
    temp = [r for r in results if r.id == "gpu.temperature"]
    assert temp[0].outcome == Outcome.FAIL and "timed out" in temp[0].message
    later = [r for r in results if r.id == "gpu.pcie.link_max"]
    assert later and all(r.outcome == Outcome.FAIL and r.action == Action.REBOOT for r in later)
    assert all("hung" in r.message for r in later)
    # ... and they were not attempted: no second wait on the wedged driver
    assert all(r.duration_s == 0.0 for r in later)
    # software checks do not depend on NVML and still ran
    assert any(r.id == "sw.nccl.version" and r.outcome == Outcome.PASS for r in results)


def test_part_two_calls_are_guarded() -> None:
    """Part 2 (compute, collectives, baseline) comes from other modules: a missing module is an
    error that blocks the image (what the profile needs is missing: never a skip), a hang a
    failure within the deadline, an exception an error."""
    from imagectl.validators.results import CheckResult
    from imagectl.validators.session import _guarded

    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'torch'")

    def hangs(*a: Any, **k: Any) -> list[CheckResult]:
        NEVER.wait()
        return []

    def raises(*a: Any, **k: Any) -> list[CheckResult]:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def passes(*a: Any, **k: Any) -> list[CheckResult]:
        return [
            CheckResult(
                id="compute.gemm", title="GEMM", severity=Severity.CRITICAL, outcome=Outcome.PASS
            )
        ]

    (absent,) = _guarded("compute.smoke", missing, lambda fn: fn(), 1.0)
    assert absent.outcome == Outcome.ERROR and "torch" in absent.message
    assert absent.action.value == "BLOCK_IMAGE"
    started = time.perf_counter()
    (hung,) = _guarded("compute.smoke", lambda: hangs, lambda fn: fn(), 0.3)
    assert time.perf_counter() - started < 60.0  # it never returns: any finish is the deadline
    assert hung.outcome == Outcome.FAIL and "timed out" in hung.message
    (err,) = _guarded("compute.smoke", lambda: raises, lambda fn: fn(), 1.0)
    assert err.outcome == Outcome.ERROR and "illegal memory access" in err.message
    (good,) = _guarded("compute.smoke", lambda: passes, lambda fn: fn(), 1.0)
    assert good.id == "compute.gemm" and good.outcome == Outcome.PASS


def test_checks_past_the_profile_budget_fail_instead_of_overrunning() -> None:
    ran: list[str] = []

    def slow(ctx: Any) -> Finding:
        ran.append("x")
        time.sleep(0.6)
        return ok()

    specs = [dataclasses.replace(_spec(slow, timeout_s=5.0), id=f"test.slow{i}") for i in range(4)]
    ctx = _ctx()
    results = run_checks(specs, ctx, budget_s=0.3)
    # The first check starts inside the budget and finishes; after it the budget is spent, so
    # the others fail without running (counted, not timed: a slow runner cannot flip it).
    assert ran == ["x"]
    assert results[0].outcome == Outcome.PASS
    assert all(r.outcome == Outcome.FAIL and "budget" in r.message for r in results[1:])


def test_an_unreadable_kernel_log_fails_with_an_action_not_a_pass() -> None:
    from imagectl.validators.checks import REGISTRY
    from imagectl.validators.host.kernel_log import KernelLog

    ctx = _ctx()
    ctx._kernel_log = KernelLog("", "none", error="journalctl: no entries; dmesg: not permitted")
    (r,) = run_checks([REGISTRY["kernel.xid"]], ctx)
    assert r.outcome == Outcome.FAIL and "not permitted" in r.message
    assert r.action == Action.DRAIN and "imagectl policy" in (r.source or "")


def test_a_hung_kernel_log_read_fails_with_an_action() -> None:
    from imagectl.validators.checks import REGISTRY

    for check_id in ("kernel.xid", "kernel.sxid"):
        assert REGISTRY[check_id].timeout_action == Action.DRAIN, check_id
