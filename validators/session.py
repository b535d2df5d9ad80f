"""One validation run: build the context (live or replayed), run the profile's checks with
their deadlines, add part 2 (compute, collectives, baseline) where the profile asks, and
produce the receipt."""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from imagectl import __version__
from imagectl.core.errors import UserError
from imagectl.validators import budgets, procs, toolkit_venv
from imagectl.validators.baseline import compare_to_baseline
from imagectl.validators.checks import specs_for
from imagectl.validators.checks.base import LOADED_PROFILES
from imagectl.validators.collectives import collective_checks
from imagectl.validators.compute import smoke_checks
from imagectl.validators.compute.profiles import profile_for
from imagectl.validators.compute.readiness import (
    TOOLKIT_HOST,
    TOOLKIT_ID,
    gather,
    init_result,
    toolkit_facts,
    toolkit_result,
)
from imagectl.validators.compute.recorded import judge_recording, not_recorded
from imagectl.validators.context import Context, NamedCalls
from imagectl.validators.coverage import Coverage, coverage
from imagectl.validators.dcgm import dcgm_checks
from imagectl.validators.dcgm.judge import RUN_ID
from imagectl.validators.expectations import Expectations
from imagectl.validators.fabric.capture import capture_fabric
from imagectl.validators.fabric.model import FabricSection
from imagectl.validators.host.facts import LiveFacts, RecordedFacts
from imagectl.validators.host.kernel_log import KernelLog, read_file_log, read_host_log
from imagectl.validators.nvml import LiveNvml, ReplayNvml
from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.receipt import Receipt, gpu_summaries, summarise, verdict_of
from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity
from imagectl.validators.runner import run_checks, run_with_deadline
from imagectl.validators.sampler import LoadSampler


@dataclass
class Options:
    profile: str = "boot"
    expect: Expectations = field(default_factory=Expectations)
    snapshot: dict[str, Any] | None = None
    snapshot_path: str | None = None
    kernel_log_file: Path | None = None
    history_dir: Path | None = None  # previous boots' receipts (kernel.xid recurrences)
    hygiene: bool = True
    hygiene_root: str = "/"
    image_id: str | None = None
    device: str = "auto"
    nodes: str | None = None
    baseline: Receipt | None = None
    max_regression_pct: float = 5.0
    sandbox: bool = False  # a try-it replay the gate may accept (recorded in the receipt)
    # "host": the GPU work runs on the torch this host already has (validate --toolkit
    # host), recorded as such; the pin is not applied (the image gate applies it)
    toolkit: str = "pinned"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def build_context(opts: Options) -> Context:
    if opts.snapshot is not None:
        snap = opts.snapshot
        nvml: NvmlBackend = ReplayNvml(snap["nvml"])
        facts: RecordedFacts | LiveFacts = RecordedFacts(snap["host"])
        log_section = snap.get("kernel_log") or {}

        def snap_log() -> KernelLog:
            return KernelLog(
                log_section.get("text", ""),
                f"snapshot:{log_section.get('source', '?')}",
                log_section.get("error"),
                bool(log_section.get("filtered", True)),
            )

        loader = snap_log
        recorded = snap.get("fabric")

        def fabric() -> FabricSection | None:
            return None if recorded is None else FabricSection.model_validate(recorded)
    else:
        nvml = LiveNvml()
        facts = LiveFacts(root=opts.hygiene_root, extra_packages=tuple(opts.expect.packages))
        loader = read_host_log
        nics = opts.expect.hardware.nics if opts.expect.hardware else None

        def fabric() -> FabricSection | None:
            # the counters read twice on a shape with fabric ports to watch; the NCCL run is
            # made by the check that needs it (Context.fabric_nccl)
            return capture_fabric(interval_s=2.0 if nics is not None else 0.0)

    if opts.kernel_log_file is not None:
        path = opts.kernel_log_file
        loader = lambda: read_file_log(path)  # noqa: E731
    return Context(
        nvml=NamedCalls(nvml),
        facts=facts,
        expect=opts.expect,
        profile=opts.profile,
        kernel_log_loader=loader,
        hygiene=opts.hygiene,
        history_dir=opts.history_dir,
        fabric_loader=fabric,
    )


declare("compute.smoke", "CUDA smoke tests", runs=Runs.SESSION, action=Action.BLOCK_IMAGE)
declare(
    "collectives.smoke",
    "Collective smoke tests",
    runs=Runs.SESSION,
    action=Action.BLOCK_IMAGE,
)


def _skip(id_: str, reason: str) -> CheckResult:
    return check_result(id=id_, severity=Severity.INFO, outcome=Outcome.SKIP, message=reason)


def _error(id_: str, exc: BaseException) -> CheckResult:
    return check_result(
        id=id_,
        severity=Severity.CRITICAL,
        outcome=Outcome.ERROR,
        message=f"{type(exc).__name__}: {exc}",
    )


_Part = TypeVar("_Part")


def _guarded(
    id_: str,
    load: Callable[[], _Part],
    call: Callable[[_Part], Iterable[CheckResult]],
    deadline_s: float,
) -> list[CheckResult]:
    """Import a part-2 function lazily and call it on the worker thread, with a deadline.

    Import failure (a part of the validator missing) -> ``error`` with BLOCK_IMAGE (what the
    profile needs is missing: never a skip); an exception -> ``error``; overrunning the
    deadline -> ``fail``, its worker processes killed and scratch folders removed.
    """
    try:
        fn = load()
    except Exception as exc:
        return [_error(id_, exc).model_copy(update={"action": Action.BLOCK_IMAGE})]
    box: dict[str, Any] = {}

    def job() -> None:
        try:
            box["out"] = list(call(fn))
        except BaseException as exc:
            box["exc"] = exc

    if not run_with_deadline(job, deadline_s):
        cleaned = procs.cleanup()  # the stage's workers and scratch folders go with it
        return [
            check_result(
                id=id_,
                severity=Severity.CRITICAL,
                outcome=Outcome.FAIL,
                action=Action.REBOOT,
                message=f"timed out after {deadline_s:g} s (a hung check is a failed check)",
                details={"killed_process_groups": cleaned["groups"]},
            )
        ]
    if "exc" in box:
        return [_error(id_, box["exc"])]
    out: list[CheckResult] = box["out"]
    return out


def _load_smoke() -> Callable[..., list[CheckResult]]:
    return smoke_checks


def _load_collectives() -> Callable[..., list[CheckResult]]:
    return collective_checks


def _load_dcgm() -> Callable[..., list[CheckResult]]:
    return dcgm_checks


def dcgm_part(ctx: Context, opts: Options, *, deadline_s: float) -> list[CheckResult]:
    """NVIDIA's own diagnostics (``dcgmi diag``) beside ours: live, or from the snapshot's
    recorded ``dcgm`` section when replaying (``validators/dcgm/``)."""
    replay = opts.snapshot is not None
    recorded = (opts.snapshot or {}).get("dcgm") if replay else None
    return _guarded(
        RUN_ID,
        _load_dcgm,
        lambda fn: fn(
            opts.profile, ctx.expect, recorded=recorded, replay=replay, deadline_s=deadline_s
        ),
        deadline_s + 5.0,
    )


def resolve_device(device: str, expect: Expectations) -> str:
    """``auto`` means CUDA on a host whose expectations name GPUs, CPU on a shape without
    GPUs; ``cpu`` and ``cuda`` are taken as asked. Never a silent fallback to the CPU."""
    if device != "auto":
        return device
    return "cuda" if expect.names_gpus else "cpu"


@dataclass
class PartTwoState:
    """What part two learnt about the run, for the receipt: the device the GPU work ran on
    and the toolkit that ran it."""

    device: str | None = None
    toolkit: dict[str, Any] | None = None


def readiness_part(
    ctx: Context, opts: Options, device: str, state: PartTwoState
) -> tuple[list[CheckResult], bool]:
    """The toolkit and CUDA, live or from the snapshot's ``cuda`` section; ready or not."""
    replay = opts.snapshot is not None
    if replay:
        facts = (opts.snapshot or {}).get("cuda")
        if facts is None:
            why = "replay: this snapshot records no toolkit or CUDA facts (capture it again)"
            return [_skip(TOOLKIT_ID, why)], False
    else:
        tries = cuinit_tries(device, opts.profile)
        facts = gather(tries)
    state.toolkit = _toolkit_record(facts, opts)
    host = opts.toolkit == TOOLKIT_HOST
    out = [toolkit_result(facts, ctx.expect.validator_toolkit, device, host=host)]
    if device == "cuda":
        out.append(init_result(facts, ctx.expect.gpu_count))
    ready = not any(r.failed for r in out)
    return out, ready


def _toolkit_record(facts: dict[str, Any] | None, opts: Options) -> dict[str, Any] | None:
    """The receipt's toolkit: what ran the GPU work, and where it came from (``source``:
    ``host`` for --toolkit host, ``wheelhouse`` for --toolkit-wheelhouse, else ``image``)."""
    toolkit = (facts or {}).get("toolkit")
    if toolkit is None:
        return None
    if opts.toolkit == TOOLKIT_HOST:
        source = TOOLKIT_HOST
    elif toolkit_venv.current() is not None:
        source = "wheelhouse"
    else:
        source = "image"
    return {**toolkit, "source": source}


def cuinit_tries(device: str, profile: str) -> int:
    if device != "cuda":
        return 0

    return profile_for(device, profile).cuinit_tries


def part_two(ctx: Context, opts: Options, state: PartTwoState) -> list[CheckResult]:
    """The toolkit and CUDA readiness, then the CUDA and collective smoke tests sampled under
    load, then DCGM's diagnostics.

    They run on the validator's worker thread (not the main thread), each stage under its
    own deadline (``budgets.py``). A host that is not ready (toolkit missing, CUDA not
    initialising) runs none of the GPU work: the coverage check then names what did not run.
    """
    device = resolve_device(opts.device, ctx.expect)
    state.device = device
    out, ready = readiness_part(ctx, opts, device, state)
    if opts.snapshot is not None:
        why = "replay: measurements are not replayed (no hardware to load)"
        out += [
            _skip("compute.smoke", why),
            _skip("collectives.smoke", why),
        ]
        out += recorded_load(ctx, (opts.snapshot or {}).get("load"))
    elif ready:
        init = next((r for r in out if r.id == "cuda.init"), None)
        out += _gpu_work(ctx, opts, device, init)
    return out + dcgm_part(ctx, opts, deadline_s=budgets.dcgm_s(opts.profile))


def recorded_load(ctx: Context, record: dict[str, Any] | None) -> list[CheckResult]:
    """Replay: the snapshot's samples under load judged by the code that judges live ones
    (``compute/recorded.py`` for ``load.*``; ``ctx.load_samples`` for ``gpu.load.*``)."""
    if not record:
        return not_recorded(
            "replay: this snapshot records no samples under load "
            "(capture with `imagectl snapshot -o FILE --load-s N` on a GPU host)"
        )
    ctx.load_samples = {int(g["index"]): list(g.get("samples") or []) for g in record["gpus"]}
    return judge_recording(
        record, ctx.nvml if ctx.nvml_ready else None, ctx.expect.gpu, ctx.expect.shape
    )


def _gpu_work(
    ctx: Context, opts: Options, device: str, init: CheckResult | None
) -> list[CheckResult]:
    """The CUDA and collective smoke tests, sampled under load, each under its deadline."""
    out: list[CheckResult] = []
    sampler = None
    if ctx.nvml_ready and ctx.handles:
        sampler = LoadSampler(ctx.nvml, ctx.handles)
        sampler.__enter__()
    try:
        out += _guarded(
            "compute.smoke",
            _load_smoke,
            lambda fn: fn(
                ctx.expect,
                device=device,
                profile=opts.profile,
                nvml=ctx.nvml if ctx.nvml_ready else None,
                init=init,
            ),
            budgets.smoke_s(device, opts.profile),
        )
        out += _guarded(
            "collectives.smoke",
            _load_collectives,
            lambda fn: fn(ctx.expect, device=device, profile=opts.profile, nodes=opts.nodes),
            budgets.collectives_s(device, opts.profile),
        )
    finally:
        if sampler is not None:
            sampler.__exit__()
            ctx.load_samples = sampler.samples
    return out


def baseline_checks(receipt: Receipt, opts: Options) -> list[CheckResult]:
    """Compare with ``--baseline``. A baseline that cannot be compared (another shape or
    GPU model, no checks) is bad input: its UserError propagates (exit 2)."""
    if opts.baseline is None:
        return []

    try:
        return compare_to_baseline(
            receipt, opts.baseline, max_regression_pct=opts.max_regression_pct
        )
    except UserError:
        raise
    except Exception as exc:  # a bug in the comparison is an error result, never a pass
        return [
            check_result(
                id="baseline.compare",
                severity=Severity.WARNING,
                outcome=Outcome.ERROR,
                message=f"{type(exc).__name__}: {exc}",
            )
        ]


def _host_summary(ctx: Context) -> dict[str, object]:
    def fact(name: str) -> Any:
        try:
            return ctx.fact(name)
        except Exception:
            return None

    module = fact("nvidia_module") or {}
    summary: dict[str, object] = {
        "hostname": fact("hostname"),
        "kernel": fact("kernel_release"),
        "os": (fact("os_release") or {}).get("PRETTY_NAME"),
        "boot": fact("boot"),
        "driver_module": module.get("version"),
        "module_flavour": module.get("flavour"),
        "nvml_library": (fact("nvml_library") or {}).get("version"),
        "nccl": (fact("nccl") or {}).get("version"),
        "gpus": len(ctx.gpus),
        "nvml_init_s": ctx.nvml_init_s,
        "cloud": (fact("cloud_image") or {}).get("cloud"),
        "region": (fact("cloud_image") or {}).get("region"),  # the fleet metrics' info
        "instance_id": (fact("cloud_image") or {}).get("instance_id"),  # the node's identity
        "manifest_sha256": fact("manifest_sha256"),
    }
    installed = toolkit_venv.current()
    if installed is not None:  # installed for this run (--toolkit-wheelhouse), then removed
        summary["toolkit_venv"] = {**installed, "toolkit": toolkit_facts()}
    return summary


def _image_id(ctx: Context, opts: Options) -> str | None:
    if opts.image_id:
        return opts.image_id
    for getter in (
        lambda: (ctx.fact("manifest") or {}).get("image_id"),
        lambda: (ctx.fact("cloud_image") or {}).get("image_id"),
    ):
        try:
            value = getter()
        except Exception:
            value = None
        if value:
            return str(value)
    return opts.expect.image_id


def validate(opts: Options) -> Receipt:
    """One run. On Ctrl-C or SIGTERM the worker processes it started are killed and their
    scratch folders removed before the interruption propagates."""
    restore = _terminate_as_interrupt()
    try:
        return _validate(opts)
    except BaseException:
        procs.cleanup()
        raise
    finally:
        restore()


def _terminate_as_interrupt() -> Callable[[], None]:
    """SIGTERM (a stopped unit, an Ansible timeout) interrupts like Ctrl-C (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, raise_interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def _validate(opts: Options) -> Receipt:
    started_at, t0 = _now(), time.perf_counter()
    ctx = build_context(opts)
    specs = specs_for(opts.profile, hygiene=opts.hygiene)
    idle = [s for s in specs if "boot" in s.profiles]
    loaded = [s for s in specs if "boot" not in s.profiles]
    results = run_checks(idle, ctx, budget_s=budgets.BOOT_S)
    state = PartTwoState()
    if opts.profile in LOADED_PROFILES:
        results += part_two(ctx, opts, state)
        results += run_checks(loaded, ctx, budget_s=budgets.JUDGE_S)
    cov, cov_result = coverage(
        opts.profile,
        opts.expect,
        results,
        device=state.device,
        replay=opts.snapshot is not None,
        toolkit=state.toolkit,
        gpus_seen=len(ctx.gpus),
    )
    results.append(cov_result)
    if ctx.nvml_ready and not ctx.nvml_wedged:
        with contextlib.suppress(Exception):
            ctx.nvml.nvmlShutdown()
    receipt = _make_receipt(ctx, opts, results, started_at, t0, cov)
    extra = baseline_checks(receipt, opts)
    if extra:
        receipt = _make_receipt(ctx, opts, results + extra, started_at, t0, cov)
    return receipt


def _make_receipt(
    ctx: Context,
    opts: Options,
    results: list[CheckResult],
    started_at: str,
    t0: float,
    cov: Coverage,
) -> Receipt:
    verdict, worst = verdict_of(results)

    return Receipt(
        image_id=_image_id(ctx, opts),
        stack=opts.expect.stack,
        stack_digest=opts.expect.stack_digest,
        validator_version=__version__,
        profile=opts.profile,  # type: ignore[arg-type]
        started_at=started_at,
        finished_at=_now(),
        duration_s=round(time.perf_counter() - t0, 4),
        mode="replay" if opts.snapshot is not None else "live",
        sandbox=opts.sandbox,
        snapshot=opts.snapshot_path,
        coverage=cov,
        host=_host_summary(ctx),
        expectations=opts.expect.model_dump(mode="json"),
        gpus=gpu_summaries(ctx.gpus, results),
        checks=results,
        summary=summarise(results),
        verdict=verdict,  # type: ignore[arg-type]
        worst_action=worst,
    )
