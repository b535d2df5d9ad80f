"""Fleet histories for a real Prometheus: hours of node series written as OpenMetrics and
backfilled with ``promtool tsdb create-blocks-from openmetrics`` (Debian's prometheus
package), then served by a real ``prometheus`` over that TSDB (no scraping): the rollout
queries it exactly as it queries a fleet's Prometheus.

A ``Node`` says what one node exported and when: the series the boot file and the watcher
write (``validators/prometheus.py``, ``validators/watch.py``), the launch record
(``up`` with the service-discovery labels), and what a test injects: reboots (the Xid
counters start again from zero, the per-code series disappear until the code is seen
again), a reimage (a second image from a time on), an ``instance`` relabel, a watcher
that cannot read (``read_ok`` 0), silence (launched, never reporting), gaps (Prometheus
down) and any value at all for a field (NaN, +Inf, -1000, 1e9, a time ten years ahead).
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.fleet.harness import PrometheusServer
from tests.support import require_tool

STEP = 60  # one look and one sample a minute (policy.look_interval_s)


def _num(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


@dataclass
class Node:
    instance_id: str
    image_id: str
    shape: str
    stack: str
    instance: str = ""
    # Xid incidents: (time, code); counted by the watcher as counters since boot
    xids: list[tuple[float, int]] = field(default_factory=list)
    reboots: list[float] = field(default_factory=list)
    passed: float = 1.0
    worst: float = 0.0
    problems: float = 0.0
    read_ok: float = 1.0
    reporting: bool = True  # False: launched, never exported anything
    watcher: bool = True  # False: the boot file only (the watcher is off)
    launched: bool = True
    reimaged_at: float | None = None  # from then on it runs ``reimaged_to``
    reimaged_to: str = ""
    reimaged_passed: float = 1.0
    relabel_at: float | None = None  # from then on its instance label is "<instance>-r"
    gaps: list[tuple[float, float]] = field(default_factory=list)  # Prometheus was down
    first_at: float | None = None  # launched then: no series before it
    boot_file: bool = True  # False: the boot unit wrote no file (no boot verdict)
    # a field's value overridden: name -> value or callable(t) -> value
    override: dict[str, float | Callable[[float], float]] = field(default_factory=dict)


def openmetrics(nodes: list[Node], start: float, end: float) -> str:
    """The nodes' series from ``start`` to ``end``, a sample every ``STEP`` seconds."""
    stamps = _range(start, end)
    families: dict[str, list[str]] = {}

    def add(name: str, labels: dict[str, str], t: float, v: float) -> None:
        inner = ",".join(f'{k}="{v2}"' for k, v2 in labels.items())
        families.setdefault(name, []).append(f"{name}{{{inner}}} {_num(v)} {t:.3f}")

    for i, n in enumerate(nodes):
        base = n.instance or f"10.9.{i // 250}.{i % 250}:9100"
        for t in stamps:
            if any(a <= t < b for a, b in n.gaps) or (n.first_at is not None and t < n.first_at):
                continue
            image = (
                n.reimaged_to if n.reimaged_at is not None and t >= n.reimaged_at else n.image_id
            )
            if n.launched:
                add("up", {"instance": base, "job": "fleet", "imagectl_instance_id": n.instance_id,
                           "imagectl_image_id": image, "imagectl_shape": n.shape}, t,
                    1 if n.reporting else 0)  # fmt: skip
            if not n.reporting:
                continue
            inst = base + "-r" if n.relabel_at is not None and t >= n.relabel_at else base
            lab = {"instance": inst, "job": "fleet"}

            def val(name: str, default: float, t: float = t, n: Node = n) -> float:
                v = n.override.get(name, default)
                return v(t) if callable(v) else v

            add("imagectl_node_info", {**lab, "instance_id": n.instance_id, "image_id": image,
                                       "shape": n.shape, "stack": n.stack}, t, 1)  # fmt: skip
            reimaged = n.reimaged_at is not None and t >= n.reimaged_at
            if n.boot_file:
                add("imagectl_validation_passed", lab, t,
                    val("passed", n.reimaged_passed if reimaged else n.passed))  # fmt: skip
                add("imagectl_validation_worst_action", lab, t, val("worst", n.worst))
            add("imagectl_gpu_problems", {**lab, "reason": "hw_slowdown"}, t,
                val("problems", n.problems))  # fmt: skip
            booted = max([start - 86400] + [r for r in n.reboots if r <= t])
            add("imagectl_node_boot_timestamp_seconds", lab, t, val("boot", booted))
            if not n.watcher:
                continue
            add("imagectl_watch_timestamp_seconds", lab, t, val("watch", t))
            add("imagectl_watch_read_ok", lab, t, val("read_ok", n.read_ok))
            seen: dict[int, int] = {}
            for when, code in n.xids:
                if booted <= when <= t:
                    seen[code] = seen.get(code, 0) + 1
            for code, k in seen.items():
                add("imagectl_xid_code_events_total", {**lab, "xid": str(code)}, t,
                    val(f"xid{code}", float(k)))  # fmt: skip
    lines = []
    for name, rows in families.items():
        kind = "counter" if name.endswith("_total") else "gauge"
        lines.append(f"# TYPE {name.removesuffix('_total')} {kind}")
        lines += rows
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _range(start: float, end: float) -> list[float]:
    n = int((end - start) // STEP)
    return [end - STEP * k for k in range(n, -1, -1)]


def serve(folder: Path, text: str) -> PrometheusServer:
    """A real Prometheus over the backfilled ``text`` (OpenMetrics)."""
    promtool = require_tool("promtool")
    binary = require_tool("prometheus")
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "history.om"
    source.write_text(text)
    proc = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(folder / "data")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    source.unlink()
    return PrometheusServer(binary, folder, [])
