"""Run checks with a hard deadline each: a hung check is a failed check, never a hung run.

Every check runs on a daemon worker thread; the runner waits up to the check's timeout
and moves on. A C call stuck inside NVML keeps its thread, which cannot block exit (daemon)
and marks NVML as wedged so later NVML checks fail at once instead of hanging in turn.
An exception is ``error`` (never ``pass``). An NVML error is judged by ``data/nvml.yaml``:
NOT_SUPPORTED is a ``skip`` only where the GPU's architecture lacks the call and no peer
of the same model answers it (``nvml/unsupported.py``); every other error fails that GPU
with its recovery action. A GPU whose handle failed fails alone.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pynvml

from imagectl.validators.context import Context
from imagectl.validators.findings import Finding
from imagectl.validators.host.facts import FactMissing
from imagectl.validators.nvml.errors import error_label, error_name, is_unsupported
from imagectl.validators.nvml.policy import nvml_policy
from imagectl.validators.nvml.unsupported import judge_unsupported
from imagectl.validators.registry import Spec
from imagectl.validators.results import Action, CheckResult, Outcome


def _result(spec: Spec, f: Finding, gpu: int | None, duration: float) -> CheckResult:
    return spec.result(
        severity=f.severity or spec.severity,
        outcome=f.outcome,
        measured=f.measured,
        expected=f.expected,
        unit=f.unit,
        source=f.source,
        action=f.action
        if f.outcome in (Outcome.FAIL, Outcome.WARN, Outcome.ERROR)
        else Action.NONE,
        duration_s=round(duration, 6),
        gpu=f.gpu if f.gpu is not None else gpu,
        message=f.message,
        details=f.details,
    )


def _from_exception(exc: BaseException) -> Finding:
    if isinstance(exc, pynvml.NVMLError):
        call = getattr(exc, "nvml_call", "an NVML call")
        name = error_name(exc)
        rule = nvml_policy().error(name)
        details = {"nvml_error": name, "call": call}
        if rule.skip:
            return Finding(
                Outcome.SKIP,
                f"{call} is not supported here: {error_label(exc)}",
                source=rule.source,
                details=details,
            )
        # every other NVML error is a fault of the GPU the call was made on
        return Finding(
            Outcome.FAIL,
            f"{call} failed: {error_label(exc)}",
            action=rule.action,
            source=rule.source,
            details=details,
        )
    if isinstance(exc, FactMissing):
        return Finding(Outcome.SKIP, str(exc))
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return Finding(
        Outcome.ERROR,
        f"the check raised {type(exc).__name__}: {exc}",
        details={"traceback": "".join(tb[-3:])[-1500:]},
    )


class _Worker:
    """A daemon thread running submitted jobs one at a time."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]] = (
            queue.SimpleQueue()
        )
        self.thread = threading.Thread(target=self._loop, name="check-worker", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job, done = self.jobs.get()
            try:
                job()
            finally:
                done.set()


_worker: _Worker | None = None
_worker_lock = threading.Lock()


def run_with_deadline(job: Callable[[], None], timeout_s: float) -> bool:
    """Run ``job`` on the worker thread; False if it did not finish within ``timeout_s``.

    A job that overruns keeps its (daemon) worker, which is abandoned: the next job gets a
    fresh worker, so one hung C call never delays the checks after it.
    """
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = _Worker()
        worker = _worker
    done = threading.Event()
    worker.jobs.put((job, done))
    if done.wait(timeout_s):
        return True
    with _worker_lock:
        if _worker is worker:
            _worker = None
    return False


def run_one(spec: Spec, ctx: Context, gpu: int | None) -> list[CheckResult]:
    box: dict[str, Any] = {}
    fn = spec.fn
    if fn is None:
        raise ValueError(f"{spec.id} runs in its own stage ({spec.runs.value}), not the runner")

    def work() -> None:
        try:
            out = fn(ctx, gpu) if spec.per_gpu else fn(ctx)
            box["findings"] = out if isinstance(out, list) else [out]
        except BaseException as exc:
            box["exc"] = exc
            if is_unsupported(exc):  # a skip only when the architecture lacks the call
                box["fault"] = judge_unsupported(ctx, gpu, exc)

    started = time.perf_counter()
    finished = run_with_deadline(work, spec.timeout_s)
    duration = time.perf_counter() - started
    if not finished:
        if spec.needs_nvml:
            ctx.nvml_wedged = True
        f = Finding(
            Outcome.FAIL,
            f"timed out after {spec.timeout_s:g} s (a hung check is a failed check)",
            action=spec.timeout_action,
            details={"timeout_s": spec.timeout_s},
        )
        return [_result(spec, f, gpu, duration)]
    if box.get("fault") is not None:
        return [_result(spec, box["fault"], gpu, duration)]
    if "exc" in box:
        return [_result(spec, _from_exception(box["exc"]), gpu, duration)]
    findings: list[Finding] = box.get("findings") or []
    if not findings:
        findings = [Finding(Outcome.ERROR, "the check returned no result")]
    return [_result(spec, f, gpu, duration) for f in findings]


def _precondition(spec: Spec, ctx: Context) -> Finding | None:
    if spec.needs_nvml and not ctx.expect.gpus_expected:
        return Finding(Outcome.SKIP, f"shape {ctx.expect.shape} has no GPU")
    if spec.needs_nvml and ctx.nvml_wedged:
        return Finding(
            Outcome.FAIL,
            "not checked: an earlier NVML call hung (driver or GPU unresponsive)",
            action=Action.REBOOT,
            details={"root_cause": "nvml_timeout"},
        )
    if spec.needs_nvml and not ctx.nvml_ready and spec.id != "nvml.init":
        return Finding(
            Outcome.FAIL,
            f"not checked: NVML unavailable ({ctx.nvml_problem})",
            action=ctx.nvml_action,
            details={"root_cause": "nvml.init"},
        )
    return None


def _no_handle(ctx: Context, gpu: int) -> Finding:
    """A GPU whose handle failed: each of its checks fails with the handle's cause; the
    other GPUs are judged as usual."""
    g = ctx.gpus[gpu]
    return Finding(
        Outcome.FAIL,
        f"not checked: GPU {gpu} could not be opened ({g.get('error')})",
        action=g.get("action") or Action.REBOOT,
        details={"root_cause": "nvml.init", "nvml_error": g.get("error")},
    )


def run_checks(
    specs: list[Spec], ctx: Context, *, budget_s: float | None = None
) -> list[CheckResult]:
    results: list[CheckResult] = []
    started = time.perf_counter()
    for spec in specs:
        pre = _precondition(spec, ctx)
        if pre is not None:
            results.append(_result(spec, pre, None, 0.0))
            continue
        targets: list[int | None] = list(range(len(ctx.handles))) if spec.per_gpu else [None]
        for gpu in targets:
            if budget_s is not None and time.perf_counter() - started > budget_s:
                f = Finding(
                    Outcome.FAIL,
                    f"not run: the profile's time budget of {budget_s:g} s was used up",
                    action=Action.REBOOT if spec.needs_nvml else Action.NONE,
                )
                results.append(_result(spec, f, gpu, 0.0))
                continue
            if spec.needs_nvml and ctx.nvml_wedged and spec.id != "nvml.init":
                pre = _precondition(spec, ctx)
                assert pre is not None
                results.append(_result(spec, pre, gpu, 0.0))
                continue
            if gpu is not None and ctx.handles[gpu] is None:
                results.append(_result(spec, _no_handle(ctx, gpu), gpu, 0.0))
                continue
            results.extend(run_one(spec, ctx, gpu))
    return results
