"""What the fleet's series say about each node over a window, read from Prometheus.

Seven instant queries at the window's end, each over ``[window]`` (``QUERIES``), give per
node (``instance``): the image and shape it runs (``imagectl_node_info``), whether its boot
check failed, the worst action it asked for, when it booted, when the watcher last looked,
its Xid incidents by code since boot and whether a GPU had a hardware problem. A node's
exposure is the time from its boot to the watcher's last look (the Xid counters count
from boot): node-hours. A node without a watcher counts for the node classes (boot check,
drain) but adds no exposure and no events: unknown, never zero.

A node that ran two images in the window (reimaged) is left out: its counters cannot be
split between them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from imagectl.rollout.prom import Prometheus, Sample

DRAIN_RANK = 4  # Action.DRAIN's rank (validators/results.py)
DRAIN_REASONS = (
    "hw_slowdown|hw_thermal_slowdown|hw_power_brake|row_remap_pending|ecc_volatile_uncorrected"
)
QUERIES = {
    "info": "max by (instance, image_id, shape) "
    '(max_over_time(imagectl_node_info{{stack="{stack}"}}[{w}s]))',
    "passed": "min by (instance) (min_over_time(imagectl_validation_passed[{w}s]))",
    "worst": "max by (instance) (max_over_time(imagectl_validation_worst_action[{w}s]))",
    "boot": "max by (instance) (max_over_time(imagectl_node_boot_timestamp_seconds[{w}s]))",
    "watched": "max by (instance) (max_over_time(imagectl_watch_timestamp_seconds[{w}s]))",
    "xids": "max by (instance, xid) (max_over_time(imagectl_xid_code_events_total[{w}s]))",
    "problems": "max by (instance) "
    '(max_over_time(imagectl_gpu_problems{{reason=~"' + DRAIN_REASONS + '"}}[{w}s]))',
}


@dataclass
class Node:
    instance: str
    image_id: str
    shape: str
    boot_failed: bool = False
    drain: bool = False
    booted_at: float | None = None
    watched_at: float | None = None
    xids: dict[int, float] = field(default_factory=dict)

    @property
    def node_hours(self) -> float | None:
        if self.booted_at is None or self.watched_at is None:
            return None
        return max(0.0, self.watched_at - self.booted_at) / 3600.0


def queries(stack: str, window_s: int) -> dict[str, str]:
    quoted = stack.replace("\\", "\\\\").replace('"', '\\"')
    return {k: q.format(stack=quoted, w=int(window_s)) for k, q in QUERIES.items()}


def read_nodes(prom: Prometheus, stack: str, window_s: int, at: float) -> list[Node]:
    """Every node of ``stack`` seen in the window (PrometheusUnavailable propagates)."""
    answers = {name: prom.query(q, at) for name, q in queries(stack, window_s).items()}
    return nodes_from(answers)


def _by_instance(samples: list[Sample]) -> dict[str, float]:
    return {s.labels.get("instance", ""): s.value for s in samples}


def nodes_from(answers: dict[str, list[Sample]]) -> list[Node]:
    images: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for s in answers["info"]:
        images[s.labels.get("instance", "")].add(
            (s.labels.get("image_id", ""), s.labels.get("shape", ""))
        )
    passed, worst = _by_instance(answers["passed"]), _by_instance(answers["worst"])
    boot, watched = _by_instance(answers["boot"]), _by_instance(answers["watched"])
    problems = _by_instance(answers["problems"])
    xids: dict[str, dict[int, float]] = defaultdict(dict)
    for s in answers["xids"]:
        try:
            code = int(s.labels.get("xid", ""))
        except ValueError:
            continue
        xids[s.labels.get("instance", "")][code] = s.value
    out = []
    for instance, seen in images.items():
        if len(seen) != 1:
            continue  # reimaged in the window
        ((image_id, shape),) = seen
        out.append(
            Node(
                instance=instance,
                image_id=image_id,
                shape=shape,
                boot_failed=passed.get(instance, 1.0) == 0.0,
                drain=worst.get(instance, 0.0) >= DRAIN_RANK or problems.get(instance, 0.0) > 0,
                booted_at=boot.get(instance),
                watched_at=watched.get(instance),
                xids=xids.get(instance, {}),
            )
        )
    return out
