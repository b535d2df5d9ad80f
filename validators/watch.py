"""The passive watcher: what a fleet node's own logs and NVML say between boots, as metrics.

A systemd timer-less service on fleet nodes (``imagectl-watch.service``, off by default:
the validator role's ``validator_watch_enabled``) runs ``imagectl watch --prometheus
FILE`` every ``--interval`` seconds (default 60). It uses no GPU time: it reads

- the kernel log of the current boot (the journal since boot): Xid and SXid incidents,
  parsed by the validator's own parser (``host.kernel_log``);
- NVML through the validator's own checks, run as they run at boot: clock-event reasons
  (``gpu.clocks.events``: HW slowdown, HW/SW thermal slowdown, power brake), pending row
  remaps (``gpu.row_remap.pending``) and volatile uncorrectable ECC errors
  (``gpu.ecc.volatile_uncorrected``),

and writes them beside the boot file (``imagectl-watch.prom``), with the boot file's
conventions (``validators/prometheus.py``):

- ``imagectl_xid_events_total`` / ``imagectl_sxid_events_total``: incidents since boot
  (counters that start again at a reboot), always present; an incident is what the boot
  check judges: one per code and GPU, however many lines report it
  (``host.kernel_log.parse_events``);
- ``imagectl_xid_code_events_total{xid}``: per Xid code, only for codes seen this boot (the
  catalog has over a hundred codes; a healthy node has none);
- ``imagectl_gpu_problem{gpu, reason} 1`` while a GPU has the problem, node-problem-detector's
  ``problem_gauge`` way, and ``imagectl_gpu_problems{reason}``: how many GPUs have it, always
  present for every reason in ``REASONS``;
- ``imagectl_watch_timestamp_seconds`` and ``imagectl_watch_read_ok`` (0 when the log or
  NVML could not be read: unknown, never healthy).

Against a replayed snapshot (``--replay``) the same code reads the snapshot's NVML and
log: the tests' emulated fleet is this code over replayed snapshots.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.validators.checks import REGISTRY
from imagectl.validators.context import Context
from imagectl.validators.host.kernel_log import parse_events, split_boots
from imagectl.validators.prometheus import Family, document, write_text
from imagectl.validators.results import CheckResult, Outcome
from imagectl.validators.runner import run_checks

DEFAULT_FILE = "/var/lib/node_exporter/textfile_collector/imagectl-watch.prom"
DEFAULT_INTERVAL_S = 60.0
# clock-event reason names (data/thresholds.yaml clock_events) -> problem reason
CLOCK_REASONS = {
    "HW_SLOWDOWN": "hw_slowdown",
    "HW_THERMAL_SLOWDOWN": "hw_thermal_slowdown",
    "SW_THERMAL_SLOWDOWN": "sw_thermal_slowdown",
    "HW_POWER_BRAKE": "hw_power_brake",
}
REASONS = (*CLOCK_REASONS.values(), "row_remap_pending", "ecc_volatile_uncorrected")
CHECKS = ("nvml.init", "gpu.clocks.events", "gpu.row_remap.pending", "gpu.ecc.volatile_uncorrected")


@dataclass
class Observation:
    at: float
    xids: Counter[int] = field(default_factory=Counter)
    sxids: int = 0
    problems: set[tuple[int, str]] = field(default_factory=set)
    gpus: int = 0
    read_ok: bool = True
    errors: list[str] = field(default_factory=list)


def _booted_at(ctx: Context) -> float | None:
    with contextlib.suppress(Exception):
        boot = ctx.fact("boot")
        if isinstance(boot, dict) and isinstance(boot.get("booted_at"), int | float):
            return float(boot["booted_at"])
    return None


def _problems(result: CheckResult) -> list[str]:
    if result.gpu is None or result.outcome in (Outcome.SKIP,):
        return []
    if result.id == "gpu.clocks.events" and isinstance(result.measured, list):
        return [CLOCK_REASONS[n] for n in result.measured if n in CLOCK_REASONS]
    if result.id == "gpu.row_remap.pending" and result.measured is True:
        return ["row_remap_pending"]
    if result.id == "gpu.ecc.volatile_uncorrected":
        value = result.measured
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return ["ecc_volatile_uncorrected"]
    return []


def observe(ctx: Context, *, now: float | None = None) -> Observation:
    """One look at the node: the current boot's log, then NVML through the checks."""
    obs = Observation(at=time.time() if now is None else now)
    log = ctx.kernel_log()
    if log.error:
        obs.read_ok = False
        obs.errors.append(f"kernel log: {log.error}")
    else:
        text, _previous, _dropped = split_boots(log.text, _booted_at(ctx))
        for event in parse_events(text):
            if event.kind == "xid":
                obs.xids[event.code] += 1
            elif event.kind == "sxid":
                obs.sxids += 1
    results = run_checks([REGISTRY[c] for c in CHECKS], ctx)
    obs.gpus = len(ctx.handles)
    for r in results:
        if r.outcome == Outcome.ERROR or (r.id == "nvml.init" and r.failed):
            obs.read_ok = False
            obs.errors.append(f"{r.id}: {r.message}")
        for reason in _problems(r):
            assert r.gpu is not None
            obs.problems.add((r.gpu, reason))
    if ctx.nvml_ready and not ctx.nvml_wedged:
        with contextlib.suppress(Exception):
            ctx.nvml.nvmlShutdown()
    return obs


def render_watch(obs: Observation) -> str:
    stamp = Family("watch_timestamp_seconds", "When the watcher last looked (Unix time).")
    stamp.add({}, obs.at)
    ok = Family(
        "watch_read_ok", "1 when the kernel log and NVML could be read (0: the rest is unknown)."
    )
    ok.add({}, 1 if obs.read_ok else 0)
    xids = Family("xid_events", "Xid incidents in this boot's kernel log.", "counter")
    xids.add({}, sum(obs.xids.values()))
    xids.name += "_total"
    by_code = Family(
        "xid_code_events", "Xid incidents in this boot, by code (codes seen only).", "counter"
    )
    by_code.name += "_total"
    for code, n in sorted(obs.xids.items()):
        by_code.add({"xid": code}, n)
    sxids = Family("sxid_events", "NVSwitch SXid incidents in this boot's kernel log.", "counter")
    sxids.name += "_total"
    sxids.add({}, obs.sxids)
    problem = Family("gpu_problem", "A GPU problem, present only while it lasts (1).")
    for gpu, reason in sorted(obs.problems):
        problem.add({"gpu": gpu, "reason": reason}, 1)
    count = Family("gpu_problems", "How many GPUs have each problem now.")
    for reason in REASONS:
        count.add({"reason": reason}, sum(1 for _g, r in obs.problems if r == reason))
    return document([stamp, ok, xids, by_code, sxids, problem, count])


def watch_once(ctx: Context, path: Path | str, *, now: float | None = None) -> Observation:
    obs = observe(ctx, now=now)
    write_text(render_watch(obs), path)
    return obs
