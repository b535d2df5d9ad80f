"""Prometheus's answers made into per-node evidence the rollout can defend.

A node is one node: its identity is the cloud's instance id (``instance_id`` in
``imagectl_node_info``, from the instance metadata), never the scrape address, so an
``instance`` relabel does not make 4 nodes into 8 (a node without that label falls back
to its ``instance``). For each node, inside the window ``(at - window, at]``:

- **launched**: the cloud's instance list as Prometheus's service discovery sees it, the
  scrape target's ``up`` series with ``imagectl_instance_id``, ``imagectl_image_id`` and
  ``imagectl_shape`` relabelled from the discovery's meta labels (EC2:
  ``__meta_ec2_instance_id``, ``__meta_ec2_ami``, ``__meta_ec2_instance_type``). A
  launched node that never exported anything is *never reporting*: unknown, never absent;
- **image and shape** (the info series); a node that ran two images in the window
  (reimaged in place) is *reimaged*: its counters cannot be split between the images, so
  it is unknown, except that a failed boot check while it ran the candidate counts
  against the candidate (conservative: the failure is what reimages a node);
- **exposure**: watched time *inside the window*, never "since boot", so a reboot changes
  nothing: the watcher's distinct looks (``changes`` of its timestamp, + 1) times the look
  interval (``policy.look_interval_s``), at most the window, times the share of samples
  whose ``imagectl_watch_read_ok`` is 1 (a blind watcher adds no clean node-hours): a node
  claims at most the window, whatever its values say, and a watcher time ten years ahead
  adds nothing; the watcher's clock is checked against Prometheus's own sample timestamps
  (``timestamp(x) - x`` within ``[-max_clock_skew_s, max_look_age_s]``);
- **incidents by Xid code**, reset-aware: the raw samples of
  ``imagectl_xid_code_events_total`` in the window, from the value at the window's start
  (``offset``), each decrease a counter reset (a reboot: Prometheus "Metric types",
  ``increase()``/``resets()``); a series born in the window counts from zero;
- **boot verdict** and **drain** (worst action, hardware problems). The boot time is
  not evidence any more (exposure is not counted from it), so a boot time of 0 moves
  nothing.

Every value that is read is checked: finite, non-negative, integral where a count, within
bounds, and plausible in time against Prometheus's sample times. A node with an
implausible value is *quarantined*: counted as unknown with the reason, named in the
output, never dropped and never allowed to move the decision by itself (``decide.py``
holds when too much is unknown).

Cost: one scan of each metric's series; the queries that return a row per node (info,
launch, looks) and the ones that return only the exceptions (``!= 1``, ``> bound``) run
concurrently (``benchmarks/rollout_decision.py --prometheus`` times 10,000 nodes).
Subqueries (``[w:step]``) would attribute each sample to its image but cost ten times that
at 10,000 nodes (measured on Prometheus 2.42), so none is used.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from dataclasses import dataclass, field

from imagectl.rollout.policy import Policy
from imagectl.rollout.prom import Prometheus, Sample, Series

DRAIN_RANK = 4  # Action.DRAIN's rank (validators/results.py)
MAX_RANK = 6  # BLOCK_IMAGE
MAX_GPUS = 64
MAX_COUNT = 1_000_000  # incidents of one code on one node in one boot: beyond is not a count
DRAIN_REASONS = (
    "hw_slowdown|hw_thermal_slowdown|hw_power_brake|row_remap_pending|ecc_volatile_uncorrected"
)
LAUNCH_LABELS = ("imagectl_instance_id", "imagectl_image_id", "imagectl_shape")
NEVER, QUARANTINED, REIMAGED, BLIND = "never reporting", "quarantined", "reimaged", "blind"

# {s}: the stack's selector, {w}: the window; {mid}, {half}: the plausible lag's middle
# and half-width. One scan of each metric's series (a second costs as much: at 10,000
# nodes each scan is most of the time); the exception queries return only the nodes whose
# value is not the healthy one.
QUERIES = {
    "info": "max by (instance, instance_id, image_id, shape) "
    '(max_over_time(imagectl_node_info{{stack="{s}"}}[{w}s]))',
    "launched": "max by (imagectl_instance_id, imagectl_image_id, imagectl_shape, instance) "
    '(max_over_time(up{{imagectl_image_id!=""}}[{w}s]))',
    "looks": "sum by (instance) (changes(imagectl_watch_timestamp_seconds[{w}s]) + 1)",
    # Prometheus's sample time minus the watcher's look time, unless within [-skew, stale]
    # (NaN is never within)
    "lag": "(timestamp(imagectl_watch_timestamp_seconds) - imagectl_watch_timestamp_seconds) "
    "unless (abs(timestamp(imagectl_watch_timestamp_seconds) - "
    "imagectl_watch_timestamp_seconds - {mid}) <= {half})",
    "read_ok": "avg by (instance) (avg_over_time(imagectl_watch_read_ok[{w}s])) != 1",
    "passed": "min by (instance) (min_over_time(imagectl_validation_passed[{w}s])) != 1",
    "worst": "max by (instance) (max_over_time(imagectl_validation_worst_action[{w}s])) != 0",
    "problems": 'max by (instance) (max_over_time(imagectl_gpu_problems{{reason=~"'
    + DRAIN_REASONS
    + '"}}[{w}s])) != 0',
    "xid_base": "last_over_time(imagectl_xid_code_events_total[{stale}s] offset {w}s)",
}
MATRIX = {"xids": "imagectl_xid_code_events_total[{w}s]"}


@dataclass
class NodeEvidence:
    """What the window says about one node (one image it ran)."""

    node: str  # the identity: instance id, else "instance:<address>"
    image_id: str
    shape: str
    instances: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | never reporting | quarantined | reimaged | blind
    launch_record: bool = False  # the cloud's instance list (via discovery) has it
    problems: list[str] = field(default_factory=list)  # why it is unknown
    boot_failed: bool = False
    drain: bool = False
    exposure_s: float = 0.0
    watch_ok_share: float = 1.0
    incidents: dict[int, int] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return self.status == "ok"

    @property
    def node_hours(self) -> float:
        return self.exposure_s / 3600.0


@dataclass
class Evidence:
    nodes: list[NodeEvidence]
    launch_records: int  # launched nodes the cloud's instance list (via discovery) gave
    queries: dict[str, str]
    at: float
    window_s: int


def _stack_selector(stack: str) -> str:
    return stack.replace("\\", "\\\\").replace('"', '\\"')


def queries(stack: str, window_s: int, at: float, policy: Policy) -> dict[str, str]:
    skew = policy.max_clock_skew_s.value
    stale = policy.max_look_age_s.value
    values = {
        "s": _stack_selector(stack), "w": int(window_s), "stale": f"{int(stale)}",
        "mid": f"{(stale - skew) / 2:g}", "half": f"{(stale + skew) / 2:g}",
    }  # fmt: skip
    return {k: q.format(**values) for k, q in {**QUERIES, **MATRIX}.items()}


def read(prom: Prometheus, stack: str, window_s: int, at: float, policy: Policy) -> Evidence:
    """The evidence for ``stack``'s nodes (PrometheusUnavailable propagates)."""
    texts = queries(stack, window_s, at, policy)
    vectors, matrix = _concurrently(prom, texts, at)
    return build(vectors, matrix, at=at, window_s=window_s, policy=policy, queries=texts)


def _concurrently(
    prom: Prometheus, texts: dict[str, str], at: float
) -> tuple[dict[str, list[Sample]], list[Series]]:
    """Every query at once, four at a time, on daemon threads: a command's deadline
    (SIGALRM in this thread) unwinds at once, and no exit waits for a read still in
    flight (each ends by the client's own deadline)."""
    gate = threading.Semaphore(4)
    vectors: dict[str, list[Sample]] = {}
    matrix: list[Series] = []
    failed: list[BaseException] = []

    def one(key: str, text: str) -> None:
        with gate:
            try:
                if key in MATRIX:
                    matrix.extend(prom.query_range_vector(text, at))
                else:
                    vectors[key] = prom.query(text, at)
            except BaseException as exc:  # handed to the caller's thread
                failed.append(exc)

    threads = [
        threading.Thread(target=one, args=(k, q), name=f"imagectl-prometheus-{k}", daemon=True)
        for k, q in texts.items()
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if failed:
        raise failed[0]
    return vectors, matrix


# -- from answers to nodes ---------------------------------------------------------------


def _by_instance(samples: list[Sample]) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        out[s.labels.get("instance", "")].append(s)
    return out


def _finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))


def _shown(s: Sample) -> str:
    return s.raw if s.raw is not None else f"{s.value:g}"


def incidents_of(points: list[tuple[float, float]], base: float | None) -> int:
    """Incidents in the window from a counter's raw samples: from ``base`` (its value at
    the window's start; None: born in the window, so from zero), each decrease a reset
    (counted from zero again), as ``increase()`` reads a counter, without extrapolation."""
    count, prev = 0.0, base
    for _t, v in points:
        if prev is None or v < prev:
            count += v
        else:
            count += v - prev
        prev = v
    return int(count)


def build(
    vectors: dict[str, list[Sample]],
    matrix: list[Series],
    *,
    at: float,
    window_s: int,
    policy: Policy,
    queries: dict[str, str] | None = None,
) -> Evidence:
    # identities: instance -> instance id; an address two nodes claimed is no identity
    ids_of: dict[str, set[str]] = defaultdict(set)
    images_of: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for s in vectors["info"]:
        inst = s.labels.get("instance", "")
        ident = s.labels.get("instance_id", "") or f"instance:{inst}"
        ids_of[inst].add(ident)
        images_of[ident].add((s.labels.get("image_id", ""), s.labels.get("shape", "")))
    problems: dict[str, list[str]] = defaultdict(list)
    instances_of: dict[str, list[str]] = defaultdict(list)
    owner: dict[str, str] = {}
    for inst, idents in ids_of.items():
        for ident in sorted(idents):
            instances_of[ident].append(inst)
            if len(idents) > 1:
                problems[ident].append(
                    f"address {inst} reported {len(idents)} instance ids in the window"
                )
        if len(idents) == 1:
            owner[inst] = next(iter(idents))

    def per_node(key: str) -> dict[str, list[Sample]]:
        out: dict[str, list[Sample]] = defaultdict(list)
        for inst, samples in _by_instance(vectors[key]).items():
            if inst in owner:
                out[owner[inst]] += samples
        return out

    looks, lag, read_ok = per_node("looks"), per_node("lag"), per_node("read_ok")
    passed, worst, gpu_problems = per_node("passed"), per_node("worst"), per_node("problems")
    base: dict[tuple[str, str], float] = {}
    for s in vectors["xid_base"]:
        inst = s.labels.get("instance", "")
        if inst in owner and _finite(s.value) and s.value >= 0:
            key = (owner[inst], s.labels.get("xid", ""))
            base[key] = max(base.get(key, 0.0), s.value)
        elif inst in owner:
            problems[owner[inst]].append(f"Xid counter at the window's start {_shown(s)}")
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    codes_of: dict[str, set[str]] = defaultdict(set)
    for series in matrix:
        inst = series.labels.get("instance", "")
        if inst not in owner:
            continue
        ident, code = owner[inst], series.labels.get("xid", "")
        if series.bad:
            problems[ident].append(f"Xid {code} counter: {series.bad} sample(s) not a number")
        for t, v in series.points:
            if not _finite(v) or v < 0 or v != int(v) or v > MAX_COUNT:
                problems[ident].append(f"Xid {code} counter sample {v:g}")
                break
            if not at - window_s - 1 <= t <= at + 1:
                problems[ident].append(f"Xid {code} sample at {t:.0f}, outside the window")
                break
        points[(ident, code)] += series.points
        codes_of[ident].add(code)

    look_s = policy.look_interval_s.value
    nodes: list[NodeEvidence] = []
    for ident, seen in images_of.items():
        issues = problems.get(ident, [])
        ok_share = 1.0
        # boot verdict: the exceptions to 1 (passed); 0 failed, anything else implausible
        boot_failed = False
        for s in passed.get(ident, []):
            if s.value == 0.0:
                boot_failed = True
            else:
                issues.append(f"boot check passed = {_shown(s)}")
        drain = False
        for s in worst.get(ident, []):
            if not (_finite(s.value) and 0 <= s.value <= MAX_RANK and s.value == int(s.value)):
                issues.append(f"worst action = {_shown(s)}")
            elif s.value >= DRAIN_RANK:
                drain = True
        for s in gpu_problems.get(ident, []):
            if not (_finite(s.value) and 0 <= s.value <= MAX_GPUS and s.value == int(s.value)):
                issues.append(f"GPUs with a hardware problem = {_shown(s)}")
            elif s.value > 0:
                drain = True
        # the watcher's clock against Prometheus's own sample time
        for s in lag.get(ident, []):
            if _finite(s.value) and s.value > 0:
                issues.append(
                    f"watcher's last look {s.value:.0f} s before Prometheus's sample time "
                    f"(at most {policy.max_look_age_s.value:g}): it stopped looking, or its "
                    "clock is behind"
                )
            else:
                issues.append(
                    f"watcher's look time {_shown(s)} s from Prometheus's sample time (at "
                    f"most {policy.max_clock_skew_s.value:g} s ahead): a wrong clock or a "
                    "forged time"
                )
        for s in read_ok.get(ident, []):
            if _finite(s.value) and 0 <= s.value <= 1:
                ok_share = min(ok_share, s.value)
            else:
                issues.append(f"watcher read_ok averaged {_shown(s)}")
        counts = [s.value for s in looks.get(ident, [])]
        exposure = 0.0
        if not all(_finite(v) and v >= 0 and v == int(v) for v in counts):
            issues.append(f"watcher's looks {', '.join(_shown(s) for s in looks[ident])}")
        elif counts:
            exposure = min(sum(counts) * look_s, float(window_s)) * ok_share
        incidents: dict[int, int] = {}
        for code in sorted(codes_of.get(ident, ())):
            try:
                number = int(code)
            except ValueError:
                continue
            good = [(t, v) for t, v in points[(ident, code)] if _finite(v) and v >= 0]
            incidents[number] = min(MAX_COUNT, incidents_of(sorted(good), base.get((ident, code))))
        for image_id, shape in sorted(seen):
            node = NodeEvidence(
                node=ident, image_id=image_id, shape=shape,
                instances=sorted(instances_of.get(ident, [])), problems=list(issues),
                boot_failed=boot_failed, drain=drain, exposure_s=round(exposure, 3),
                watch_ok_share=round(ok_share, 4), incidents=incidents,
            )  # fmt: skip
            if len(seen) > 1:
                node.status = REIMAGED
                node.problems.append(
                    f"ran {len(seen)} images in the window (reimaged): its counters cannot be split"
                )
            elif issues:
                node.status = QUARANTINED
            elif not counts or exposure <= 0:
                node.status = BLIND
                node.problems.append("no watcher look in the window")
            elif ok_share < policy.min_watch_ok_share.value:
                node.status = BLIND
                node.problems.append(
                    f"the watcher could read the log and NVML in {ok_share:.0%} of its looks"
                )
            nodes.append(node)
    # launch accounting: a launched node that never reported is unknown, never absent
    by_node: dict[str, list[NodeEvidence]] = defaultdict(list)
    for n in nodes:
        by_node[n.node].append(n)
    launches = 0
    for s in vectors["launched"]:
        ident, image_id, shape = (s.labels.get(k, "") for k in LAUNCH_LABELS)
        if not ident or not image_id:
            continue
        launches += 1
        # a node whose validator wrote no instance id is known by its address
        known = ident if ident in by_node else f"instance:{s.labels.get('instance', '')}"
        if known in by_node:
            for n in by_node[known]:
                n.launch_record = True
            continue
        never = NodeEvidence(
            node=ident, image_id=image_id, shape=shape, status=NEVER, launch_record=True,
            problems=["launched (the cloud's instance list) but never reported"],
        )  # fmt: skip
        by_node[ident].append(never)
        nodes.append(never)
    return Evidence(nodes, launches, queries or {}, at, window_s)
