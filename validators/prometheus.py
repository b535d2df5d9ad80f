"""A node's health as Prometheus fleet metrics, for the node exporter's textfile collector.

The boot unit (``imagectl validate --prometheus FILE``) writes
``/var/lib/node_exporter/textfile_collector/imagectl.prom``; the passive watcher
(``imagectl.validators.watch``, ``imagectl-watch.prom``) writes its own file beside it.
Both are written atomically (a temporary file in the same folder, then a rename: the
collector never reads half a file, and reads only ``*.prom``).

Conventions (Prometheus "Metric and label naming"; dcgm-exporter; node-problem-detector):

- Base units in the name (``_celsius``, ``_watts``, ``_seconds``), never a unit label.
- One info metric, ``imagectl_node_info{image_id, instance_id, stack, shape, cloud,
  region, profile, stack_digest, validator_version} 1`` (``instance_id``: the cloud's
  instance id, the node's identity in the rollout); every other series carries no image
  or stack label and is joined to it by instance:
  ``imagectl_validation_passed * on(instance) group_left(image_id, shape) imagectl_node_info``.
- The verdict and its time: ``imagectl_validation_passed`` (1/0),
  ``imagectl_validation_timestamp_seconds``, ``imagectl_validation_duration_seconds``,
  ``imagectl_validation_worst_action`` (a rank, no label: 0 NONE ... 6 BLOCK_IMAGE),
  ``imagectl_validation_failed_checks`` (always present: 0 on a healthy node) and
  ``imagectl_node_boot_timestamp_seconds`` (the boot the result is for).
- Failing checks only, as ``imagectl_check_failed{check, gpu} 1`` (``gpu`` empty for a
  host check), node-problem-detector's way rather than a 0/1 gauge per check: an 8-GPU
  node runs about 230 check results at boot, so an always-present gauge per check and GPU
  would be about 230 series per node (2.3 million for 10,000 nodes), while a healthy node
  has none of these. The set changes only when the file is rewritten (once per boot), so
  the series do not flap between scrapes, and ``imagectl_validation_failed_checks`` is the
  always-present count that tells "no failure" from "no data".
- Per GPU, labelled ``gpu`` as dcgm-exporter labels it (so a fleet joins them on
  ``instance`` and ``gpu``): ``imagectl_gpu_passed``, ``imagectl_gpu_temperature_celsius``,
  ``imagectl_gpu_power_limit_watts``.

A healthy 8-GPU node writes 31 series here and 10 from the watcher (``SERIES_BUDGET``: 50, a test
counts them from replayed 8-GPU snapshots). Label values go through the one sanitizer
(``imagectl.core.safetext.prom_label``) and are escaped as the exposition format requires; tests
read the files back with prometheus_client's own parser.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from imagectl.core.fsutil import atomic_write
from imagectl.core.safetext import one_line, prom_label
from imagectl.validators.receipt import Receipt

PREFIX = "imagectl_"
DEFAULT_FILE = "/var/lib/node_exporter/textfile_collector/imagectl.prom"
SERIES_BUDGET = 50  # per 8-GPU node, boot file and watcher file together
INFO_LABELS = (
    "image_id", "instance_id", "stack", "shape", "cloud", "region", "profile",
    "stack_digest", "validator_version",
)  # fmt: skip


def escape_label(value: object) -> str:
    """A label value as the text format writes it: inert (``imagectl.core.safetext``: no
    escape sequence, control character or bidi control from a host), on one line,
    ``\\`` and ``"`` escaped."""
    return prom_label(value)


def _escape_help(text: str) -> str:
    return one_line(text).replace("\\", "\\\\")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Family:
    """One metric family: its HELP, TYPE and samples (label values made inert)."""

    def __init__(self, name: str, help_text: str, kind: str = "gauge"):
        self.name = PREFIX + name
        self.help = help_text
        self.kind = kind
        self.samples: list[tuple[dict[str, object], float]] = []

    def add(self, labels: Mapping[str, object], value: float) -> None:
        self.samples.append((dict(labels), value))

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]
        for labels, value in self.samples:
            inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
            lines.append(f"{self.name}{{{inner}}} {_number(value)}" if inner else
                         f"{self.name} {_number(value)}")  # fmt: skip
        return lines


def document(families: list[Family]) -> str:
    """The families with samples, as one text-format document ending in a line feed."""
    lines = [line for f in families if f.samples for line in f.render()]
    return "\n".join(lines) + "\n"


def _timestamp(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _region(receipt: Receipt) -> str:
    return str(receipt.host.get("region") or "")


def node_info(receipt: Receipt) -> dict[str, str]:
    """The info metric's labels: what image this node runs, on what."""
    expect = receipt.expectations or {}
    return {
        "image_id": receipt.image_id or "",
        # the node's stable identity (the cloud's instance id): the rollout counts a node
        # once however its scrape address is relabelled
        "instance_id": str(receipt.host.get("instance_id") or ""),
        "stack": receipt.stack or "",
        "shape": str(expect.get("shape") or ""),
        "cloud": str(receipt.host.get("cloud") or expect.get("cloud") or ""),
        "region": _region(receipt),
        "profile": receipt.profile,
        "stack_digest": receipt.stack_digest or "",
        "validator_version": receipt.validator_version,
    }


def _measured(receipt: Receipt, check: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for c in receipt.checks:
        value = c.measured
        if c.id == check and c.gpu is not None and isinstance(value, int | float):
            out[c.gpu] = float(value)  # a bool is never measured by these two checks
    return out


def render(receipt: Receipt) -> str:
    """The receipt as text-format metrics (one document, ending in a line feed)."""
    info = Family("node_info", "The image this node runs and what validated it (always 1).")
    info.add(node_info(receipt), 1)
    passed = Family("validation_passed", "1 when the validation verdict is pass, else 0.")
    passed.add({}, 1 if receipt.verdict == "pass" else 0)
    when = Family("validation_timestamp_seconds", "When the validation finished (Unix time).")
    finished = _timestamp(receipt.finished_at)
    if finished is not None:
        when.add({}, finished)
    duration = Family("validation_duration_seconds", "How long the validation ran.")
    duration.add({}, receipt.duration_s)
    worst = Family(
        "validation_worst_action",
        "Rank of the most drastic recovery action the failing checks ask for "
        "(0 NONE, 1 RESTART_APP, 2 RESET_GPU, 3 REBOOT, 4 DRAIN, 5 ISOLATE_RMA, 6 BLOCK_IMAGE).",
    )
    worst.add({}, receipt.worst_action.rank)
    failed_count = Family(
        "validation_failed_checks", "Check results that failed or errored (0: none)."
    )
    failing = sorted(
        {(c.id, "" if c.gpu is None else str(c.gpu)) for c in receipt.checks if c.failed}
    )
    failed_count.add({}, sum(1 for c in receipt.checks if c.failed))
    boot = Family("node_boot_timestamp_seconds", "When the boot this result is for began.")
    booted = (receipt.host.get("boot") or {}).get("booted_at")
    if isinstance(booted, int | float) and not isinstance(booted, bool):
        boot.add({}, float(booted))
    failed = Family(
        "check_failed", "A failing check (present only while failing; gpu empty: the host)."
    )
    for check, gpu in failing:
        failed.add({"check": check, "gpu": gpu}, 1)

    gpu_passed = Family("gpu_passed", "1 when every check of this GPU passed (or warned).")
    for g in receipt.gpus:
        gpu_passed.add({"gpu": g.index}, 0 if g.outcome == "fail" else 1)
    temperature = Family("gpu_temperature_celsius", "GPU temperature at validation.")
    for index, value in sorted(_measured(receipt, "gpu.temperature").items()):
        temperature.add({"gpu": index}, value)
    power = Family("gpu_power_limit_watts", "GPU enforced power limit at validation.")
    for index, value in sorted(_measured(receipt, "gpu.power.limit").items()):
        power.add({"gpu": index}, value)
    return document(
        [info, passed, when, duration, worst, failed_count, boot, failed, gpu_passed,
         temperature, power]
    )  # fmt: skip


def write_prometheus(receipt: Receipt, path: Path | str) -> Path:
    """Write ``render(receipt)`` to ``path`` atomically (0644: the exporter reads it)."""
    return atomic_write(path, render(receipt), mode=0o644)


def write_text(text: str, path: Path | str) -> Path:
    return atomic_write(path, text, mode=0o644)


def count_series(text: str) -> int:
    """Sample lines in a text-format document (each is one series)."""
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))
