"""A receipt as Prometheus text-format metrics, for the node exporter's textfile collector.

The boot unit (``imagectl validate --prometheus FILE``) writes
``/var/lib/node_exporter/textfile_collector/imagectl.prom``, so a fleet's existing
monitoring sees what the validator saw. Written atomically (a temporary file in the same
folder, then a rename: the collector never reads half a file, and reads only ``*.prom``).
Every series carries ``image_id`` and ``stack``:

- ``imagectl_validation_info{..., profile, stack_digest, validator_version, mode} 1``
- ``imagectl_validation_passed`` 1 or 0 (the verdict)
- ``imagectl_validation_worst_action{action}``: the rank of the receipt's worst action
  (0 NONE, 1 RESTART_APP, 2 RESET_GPU, 3 REBOOT, 4 DRAIN, 5 ISOLATE_RMA, 6 BLOCK_IMAGE)
- ``imagectl_validation_finished_timestamp_seconds``, ``imagectl_validation_duration_seconds``
  (a value older than ``node_boot_time_seconds`` is a previous boot's: the unit removes the
  file before it runs, so a validator that never finished leaves none)
- ``imagectl_validation_checks{outcome}``: how many check results had each outcome
- ``imagectl_check{check, gpu, outcome, action, severity}``: one series per check outcome
  (the number of results, 1 unless a check reported several on one GPU; ``gpu`` is empty
  for host checks)
- ``imagectl_gpu_passed{gpu, uuid, name}`` and ``imagectl_gpu_worst_action{gpu, action}``
- ``imagectl_gpu_health{gpu, check, field, unit}``: every number a per-GPU check measured
  (temperature, power limit, ECC and remapped-row counters, PCIe replays, active NVLinks;
  a true/false as 1/0; ``field`` names the counter of a measurement with several)

Label values are escaped as the exposition format requires (backslash, double quote, line
feed); tests read the file back with prometheus_client's own parser.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from imagectl.fsutil import atomic_write
from imagectl.validators.receipt import Receipt
from imagectl.validators.results import Outcome

PREFIX = "imagectl_"
DEFAULT_FILE = "/var/lib/node_exporter/textfile_collector/imagectl.prom"


def escape_label(value: object) -> str:
    """A label value as the text format writes it: inert (``imagectl.safetext``: no
    escape sequence, control character or bidi control from a host), on one line,
    ``\\`` and ``"`` escaped."""
    from imagectl.safetext import prom_label

    return prom_label(value)


def _escape_help(text: str) -> str:
    from imagectl.safetext import one_line

    return one_line(text).replace("\\", "\\\\")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Family:
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
            lines.append(f"{self.name}{{{inner}}} {_number(value)}")
        return lines


def _numbers(measured: Any) -> list[tuple[str, float]]:
    """(field, value) of every number in a measurement: a number or a bool itself
    (field ""), or the numeric entries of a mapping (field = its key)."""
    if isinstance(measured, bool):
        return [("", 1.0 if measured else 0.0)]
    if isinstance(measured, int | float):
        return [("", float(measured))]
    if isinstance(measured, dict):
        out = []
        for key, value in measured.items():
            if isinstance(value, bool):
                out.append((str(key), 1.0 if value else 0.0))
            elif isinstance(value, int | float):
                out.append((str(key), float(value)))
        return out
    return []


def _timestamp(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def render(receipt: Receipt) -> str:
    """The receipt as text-format metrics (one document, ending in a line feed)."""
    base = {"image_id": receipt.image_id or "", "stack": receipt.stack or ""}
    info = _Family("validation_info", "The validation run this file reports (always 1).")
    info.add(
        {
            **base,
            "profile": receipt.profile,
            "stack_digest": receipt.stack_digest or "",
            "validator_version": receipt.validator_version,
            "mode": receipt.mode,
        },
        1,
    )
    passed = _Family("validation_passed", "1 when the validation verdict is pass, else 0.")
    passed.add(base, 1 if receipt.verdict == "pass" else 0)
    worst = _Family(
        "validation_worst_action",
        "Rank of the most drastic recovery action the failing checks ask for "
        "(0 NONE, 1 RESTART_APP, 2 RESET_GPU, 3 REBOOT, 4 DRAIN, 5 ISOLATE_RMA, 6 BLOCK_IMAGE).",
    )
    worst.add({**base, "action": receipt.worst_action.value}, receipt.worst_action.rank)
    finished = _Family(
        "validation_finished_timestamp_seconds", "When the validation finished (Unix time)."
    )
    when = _timestamp(receipt.finished_at)
    if when is not None:
        finished.add(base, when)
    duration = _Family("validation_duration_seconds", "How long the validation ran.")
    duration.add(base, receipt.duration_s)
    totals = _Family("validation_checks", "Check results per outcome.")
    for each in Outcome:
        totals.add({**base, "outcome": each.value}, receipt.summary.get(each.value, 0))

    checks = _Family(
        "check",
        "Check results by check, GPU (empty: the host), outcome and recovery action.",
    )
    counted: Counter[tuple[str, str, str, str, str]] = Counter()
    for c in receipt.checks:
        gpu = "" if c.gpu is None else str(c.gpu)
        counted[(c.id, gpu, c.outcome.value, c.action.value, c.severity.value)] += 1
    for (check, gpu, outcome, action, severity), n in counted.items():
        checks.add(
            {**base, "check": check, "gpu": gpu, "outcome": outcome, "action": action,
             "severity": severity},
            n,
        )  # fmt: skip

    gpu_passed = _Family("gpu_passed", "1 when every check of this GPU passed (or warned).")
    gpu_worst = _Family("gpu_worst_action", "Rank of this GPU's most drastic recovery action.")
    for g in receipt.gpus:
        gpu_passed.add(
            {**base, "gpu": g.index, "uuid": g.uuid or "", "name": g.name or ""},
            0 if g.outcome == "fail" else 1,
        )
        gpu_worst.add({**base, "gpu": g.index, "action": g.worst_action.value}, g.worst_action.rank)

    health = _Family(
        "gpu_health",
        "Every number a per-GPU check measured (a true/false as 1/0), by check and field.",
    )
    values: dict[tuple[str, str, str], tuple[str, float]] = {}
    for c in receipt.checks:
        if c.gpu is None:
            continue
        for field, value in _numbers(c.measured):
            values[(str(c.gpu), c.id, field)] = (c.unit or "", value)
    for (gpu, check, field), (unit, value) in values.items():
        health.add({**base, "gpu": gpu, "check": check, "field": field, "unit": unit}, value)

    families = [info, passed, worst, finished, duration, totals, checks, gpu_passed, gpu_worst]
    lines = [line for f in [*families, health] if f.samples for line in f.render()]
    return "\n".join(lines) + "\n"


def write_prometheus(receipt: Receipt, path: Path | str) -> Path:
    """Write ``render(receipt)`` to ``path`` atomically (0644: the exporter reads it)."""
    return atomic_write(path, render(receipt), mode=0o644)
