"""One validation run: build the context (live or replayed), run the profile's checks with
their deadlines, add part 2 (compute, collectives, baseline) where the profile asks, and
produce the receipt."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.errors import UserError
from imagectl.validators.checks import specs_for
from imagectl.validators.checks.base import LOADED_PROFILES
from imagectl.validators.context import Context, NamedCalls
from imagectl.validators.expectations import Expectations
from imagectl.validators.host.kernel_log import KernelLog, read_file_log, read_host_log
from imagectl.validators.receipt import Receipt, gpu_summaries, summarise, verdict_of
from imagectl.validators.results import Action, CheckResult, Outcome, Severity
from imagectl.validators.runner import run_checks, run_with_deadline

# Wall-time budget per profile (checks past it fail rather than overrun).
PROFILE_BUDGET_S: dict[str, float | None] = {
    "boot": 30.0,
    "quick": 180.0,
    "full": 1200.0,
    "burn": None,
}


# Time kept back from part 2 for the checks that judge its samples.
PART_TWO_RESERVE_S = 10.0


@dataclass
class Options:
    profile: str = "boot"
    expect: Expectations = field(default_factory=Expectations)
    snapshot: dict[str, Any] | None = None
    snapshot_path: str | None = None
    kernel_log_file: Path | None = None
    hygiene: bool = True
    hygiene_root: str = "/"
    image_id: str | None = None
    device: str = "auto"
    nodes: str | None = None
    baseline: dict[str, Any] | None = None
    max_regression_pct: float = 5.0


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def build_context(opts: Options) -> Context:
    from imagectl.validators.host.facts import LiveFacts, RecordedFacts
    from imagectl.validators.nvml import LiveNvml, ReplayNvml

    if opts.snapshot is not None:
        snap = opts.snapshot
        nvml: Any = ReplayNvml(snap["nvml"])
        facts: Any = RecordedFacts(snap["host"])
        log_section = snap.get("kernel_log") or {}

        def snap_log() -> KernelLog:
            return KernelLog(
                log_section.get("text", ""),
                f"snapshot:{log_section.get('source', '?')}",
                log_section.get("error"),
                bool(log_section.get("filtered", True)),
            )

        loader = snap_log
    else:
        nvml = LiveNvml()
        facts = LiveFacts(root=opts.hygiene_root, extra_packages=tuple(opts.expect.packages))
        loader = read_host_log
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
    )


def _skip(id_: str, title: str, reason: str) -> CheckResult:
    return CheckResult(
        id=id_, title=title, severity=Severity.INFO, outcome=Outcome.SKIP, message=reason
    )


def _error(id_: str, title: str, exc: BaseException) -> CheckResult:
    return CheckResult(
        id=id_,
        title=title,
        severity=Severity.CRITICAL,
        outcome=Outcome.ERROR,
        message=f"{type(exc).__name__}: {exc}",
    )


def _guarded(
    id_: str,
    title: str,
    load: Callable[[], Callable[..., Any]],
    call: Callable[[Callable[..., Any]], Any],
    deadline_s: float,
) -> list[CheckResult]:
    """Import a part-2 function lazily and call it on the worker thread, with a deadline.

    Import failure (module absent, torch missing) -> ``skip`` with the reason; an exception
    -> ``error``; overrunning the deadline -> ``fail`` (the run moves on).
    """
    try:
        fn = load()
    except Exception as exc:
        return [_skip(id_, title, f"unavailable: {type(exc).__name__}: {exc}")]
    box: dict[str, Any] = {}

    def job() -> None:
        try:
            box["out"] = list(call(fn))
        except BaseException as exc:
            box["exc"] = exc

    if not run_with_deadline(job, deadline_s):
        return [
            CheckResult(
                id=id_,
                title=title,
                severity=Severity.CRITICAL,
                outcome=Outcome.FAIL,
                action=Action.REBOOT,
                message=f"timed out after {deadline_s:g} s (a hung check is a failed check)",
            )
        ]
    if "exc" in box:
        return [_error(id_, title, box["exc"])]
    out: list[CheckResult] = box["out"]
    return out


def _load_smoke() -> Callable[..., Any]:
    from imagectl.validators.compute import smoke_checks

    return smoke_checks


def _load_collectives() -> Callable[..., Any]:
    from imagectl.validators.collectives import collective_checks

    return collective_checks


def _load_dcgm() -> Callable[..., Any]:
    from imagectl.validators.dcgm import dcgm_checks

    return dcgm_checks


def dcgm_part(ctx: Context, opts: Options, *, deadline_s: float) -> list[CheckResult]:
    """NVIDIA's own diagnostics (``dcgmi diag``) beside ours: live, or from the snapshot's
    recorded ``dcgm`` section when replaying (``validators/dcgm/``)."""
    replay = opts.snapshot is not None
    recorded = (opts.snapshot or {}).get("dcgm") if replay else None
    return _guarded(
        "dcgm.diag",
        "DCGM diagnostics (dcgmi diag)",
        _load_dcgm,
        lambda fn: fn(
            opts.profile, ctx.expect, recorded=recorded, replay=replay, deadline_s=deadline_s
        ),
        deadline_s + 5.0,
    )


def part_two(ctx: Context, opts: Options, *, deadline_s: float) -> list[CheckResult]:
    """The CUDA and collective smoke tests (other modules), sampled under load.

    They run on the validator's worker thread (not the main thread) under the profile's
    remaining time budget.
    """
    if opts.snapshot is not None:
        return [
            _skip("compute.smoke", "CUDA smoke tests", "replay: no hardware to load"),
            _skip("collectives.smoke", "Collective smoke tests", "replay: no hardware"),
            *dcgm_part(ctx, opts, deadline_s=deadline_s),
        ]
    out: list[CheckResult] = []
    sampler = None
    if ctx.nvml_ready and ctx.handles:
        from imagectl.validators.sampler import LoadSampler

        sampler = LoadSampler(ctx.nvml, ctx.handles)
        sampler.__enter__()
    started = time.perf_counter()
    try:
        out += _guarded(
            "compute.smoke",
            "CUDA smoke tests",
            _load_smoke,
            lambda fn: fn(
                ctx.expect,
                device=opts.device,
                profile=opts.profile,
                nvml=ctx.nvml if ctx.nvml_ready else None,
            ),
            deadline_s,
        )
        out += _guarded(
            "collectives.smoke",
            "Collective smoke tests",
            _load_collectives,
            lambda fn: fn(ctx.expect, device=opts.device, profile=opts.profile, nodes=opts.nodes),
            max(1.0, deadline_s - (time.perf_counter() - started)),
        )
    finally:
        if sampler is not None:
            sampler.__exit__()
            ctx.load_samples = sampler.samples
    out += dcgm_part(ctx, opts, deadline_s=max(1.0, deadline_s - (time.perf_counter() - started)))
    return out


def baseline_checks(receipt: dict[str, Any], opts: Options) -> list[CheckResult]:
    """Compare with ``--baseline``. A baseline that cannot be compared (another shape or
    GPU model, no checks) is bad input: its UserError propagates (exit 2)."""
    if opts.baseline is None:
        return []
    from imagectl.validators.baseline import compare_to_baseline

    try:
        return compare_to_baseline(
            receipt, opts.baseline, max_regression_pct=opts.max_regression_pct
        )
    except UserError:
        raise
    except Exception as exc:  # a bug in the comparison is an error result, never a pass
        return [
            CheckResult(
                id="baseline.compare",
                title="Comparison with the baseline receipt",
                severity=Severity.WARNING,
                outcome=Outcome.ERROR,
                message=f"{type(exc).__name__}: {exc}",
            )
        ]


def _host_summary(ctx: Context) -> dict[str, Any]:
    def fact(name: str) -> Any:
        try:
            return ctx.fact(name)
        except Exception:
            return None

    module = fact("nvidia_module") or {}
    return {
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
    }


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
    started_at, t0 = _now(), time.perf_counter()
    ctx = build_context(opts)
    specs = specs_for(opts.profile, hygiene=opts.hygiene)
    idle = [s for s in specs if "boot" in s.profiles]
    loaded = [s for s in specs if "boot" not in s.profiles]
    results = run_checks(idle, ctx, budget_s=PROFILE_BUDGET_S["boot"])
    if opts.profile in LOADED_PROFILES:
        budget = PROFILE_BUDGET_S[opts.profile] or 24 * 3600.0
        remaining = budget - (time.perf_counter() - t0) - PART_TWO_RESERVE_S
        results += part_two(ctx, opts, deadline_s=max(1.0, remaining))
        results += run_checks(loaded, ctx, budget_s=PROFILE_BUDGET_S[opts.profile])
    if ctx.nvml_ready and not ctx.nvml_wedged:
        with contextlib.suppress(Exception):
            ctx.nvml.nvmlShutdown()
    receipt = _make_receipt(ctx, opts, results, started_at, t0)
    extra = baseline_checks(receipt.model_dump(mode="json"), opts)
    if extra:
        receipt = _make_receipt(ctx, opts, results + extra, started_at, t0)
    return receipt


def _make_receipt(
    ctx: Context, opts: Options, results: list[CheckResult], started_at: str, t0: float
) -> Receipt:
    verdict, worst = verdict_of(results)
    from imagectl import __version__

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
        snapshot=opts.snapshot_path,
        host=_host_summary(ctx),
        expectations=opts.expect.model_dump(mode="json"),
        gpus=gpu_summaries(ctx.gpus, results),
        checks=results,
        summary=summarise(results),
        verdict=verdict,  # type: ignore[arg-type]
        worst_action=worst,
    )
