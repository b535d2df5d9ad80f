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

import bisect
import math
import re
import threading
from collections import defaultdict
from dataclasses import asdict, dataclass, field

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
NO_VERDICT = "no boot verdict"
# the raw series of reimaged nodes, read again to split them by image ({i}: their addresses)
SPLIT = {
    "info": 'imagectl_node_info{{instance=~"{i}"}}[{w}s]',
    "passed": 'imagectl_validation_passed{{instance=~"{i}"}}[{w}s]',
    "worst": 'imagectl_validation_worst_action{{instance=~"{i}"}}[{w}s]',
    "problems": 'imagectl_gpu_problems{{instance=~"{i}",reason=~"' + DRAIN_REASONS + '"}}[{w}s]',
    "watch": 'imagectl_watch_timestamp_seconds{{instance=~"{i}"}}[{w}s]',
    "read_ok": 'imagectl_watch_read_ok{{instance=~"{i}"}}[{w}s]',
}

# {s}: the stack's selector, {w}: the window; {mid}, {half}: the plausible lag's middle
# and half-width. One scan of each metric's series (a second costs as much: at 10,000
# nodes each scan is most of the time); the exception queries return only the nodes whose
# value is not the healthy one.
QUERIES = {
    "info": "max by (instance, instance_id, image_id, shape) "
    '(max_over_time(imagectl_node_info{{stack="{s}"}}[{w}s]))',
    # a row per launch record, its value the first time Prometheus scraped the target in
    # the window (to the step: a subquery's cost grows with window / step)
    "launched": "min by (imagectl_instance_id, imagectl_image_id, imagectl_shape, instance) "
    '(min_over_time(timestamp(up{{imagectl_image_id!=""}})[{w}s:{lstep}s]))',
    "looks": "sum by (instance) (changes(imagectl_watch_timestamp_seconds[{w}s]) + 1)",
    # Prometheus's sample time minus the watcher's look time, unless within [-skew, stale]
    # (NaN is never within)
    "lag": "(timestamp(imagectl_watch_timestamp_seconds) - imagectl_watch_timestamp_seconds) "
    "unless (abs(timestamp(imagectl_watch_timestamp_seconds) - "
    "imagectl_watch_timestamp_seconds - {mid}) <= {half})",
    # every look's time against the evaluation time: none ahead of it, none before the
    # window (less the plausible lag); only the exceptions come back
    "clock": "(max by (instance) (max_over_time(imagectl_watch_timestamp_seconds[{w}s])) "
    "> {future}) or (min by (instance) (min_over_time(imagectl_watch_timestamp_seconds"
    "[{w}s])) < {past})",
    # a row per node: a watched node without read_ok, or without a boot verdict, is unknown
    "read_ok": "avg by (instance) (avg_over_time(imagectl_watch_read_ok[{w}s]))",
    "passed": "min by (instance) (min_over_time(imagectl_validation_passed[{w}s]))",
    "worst": "max by (instance) (max_over_time(imagectl_validation_worst_action[{w}s])) != 0",
    "problems": 'max by (instance) (max_over_time(imagectl_gpu_problems{{reason=~"'
    + DRAIN_REASONS
    + '"}}[{w}s])) != 0',
    "xid_base": "last_over_time(imagectl_xid_code_events_total[{stale}s] offset {w}s)",
}


MATRIX = {"xids": "imagectl_xid_code_events_total[{w}s]"}
VERDICTS = ("passed", "failed", "unknown")

# Where each field of the evidence model comes from: the answers (keys of QUERIES, MATRIX)
# it is read from; () for what the reading decides from the others. A new field must be
# named here (tests/fleet/test_evidence_fields.py gives every answer each hostile value:
# NaN, +-Inf, negative, huge, wrong type, missing, a time in the future).
FIELD_SOURCES: dict[str, tuple[str, ...]] = {
    "node": ("info", "launched"),
    "image_id": ("info", "launched"),
    "shape": ("info", "launched"),
    "instances": ("info",),
    "status": (),
    "launch_record": ("launched",),
    "launched_at": ("launched",),
    "launched_before_window": ("launched",),
    "problems": (),
    "boot_verdict": ("passed",),
    "boot_failed": ("passed",),
    "drain": ("worst", "problems"),
    "exposure_s": ("looks", "lag", "clock", "read_ok"),
    "watch_ok_share": ("read_ok",),
    "incidents": ("xids", "xid_base"),
}


@dataclass
class NodeEvidence:
    """What the window says about one node (one image it ran)."""

    node: str  # the identity: instance id, else "instance:<address>"
    image_id: str
    shape: str
    instances: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | never reporting | quarantined | reimaged | blind | no boot verdict
    launch_record: bool = False  # the cloud's instance list (via discovery) has it
    # the first time Prometheus scraped its target (with this image) in the window, to
    # policy.launch_time_step_s; None: no launch record
    launched_at: float | None = None
    launched_before_window: bool = False  # first seen at the window's start
    problems: list[str] = field(default_factory=list)  # why it is unknown
    boot_verdict: str = "passed"  # passed | failed | unknown (no boot-check series)
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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Evidence:
    nodes: list[NodeEvidence]
    launch_records: int  # launched nodes the cloud's instance list (via discovery) gave
    queries: dict[str, str]
    at: float
    window_s: int


def _stack_selector(stack: str) -> str:
    return stack.replace("\\", "\\\\").replace('"', '\\"')


def _regex(values: list[str]) -> str:
    """An RE2 alternation matching exactly ``values``, as a PromQL string's content."""
    return _stack_selector("|".join(re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", v) for v in values))


def queries(stack: str, window_s: int, at: float, policy: Policy) -> dict[str, str]:
    skew = policy.max_clock_skew_s.value
    stale = policy.max_look_age_s.value
    values = {
        "s": _stack_selector(stack), "w": int(window_s), "stale": f"{int(stale)}",
        "mid": f"{(stale - skew) / 2:g}", "half": f"{(stale + skew) / 2:g}",
        "lstep": f"{int(policy.launch_time_step_s.value)}",
        "future": f"{at + skew:.3f}", "past": f"{at - window_s - stale:.3f}",
    }  # fmt: skip
    return {k: q.format(**values) for k, q in {**QUERIES, **MATRIX}.items()}


def read(
    prom: Prometheus,
    stack: str,
    window_s: int,
    at: float,
    policy: Policy,
    created: dict[str, float] | None = None,
) -> Evidence:
    """The evidence for ``stack``'s nodes (PrometheusUnavailable propagates). ``created``:
    when each image existed (cloud image id -> Unix time, from the catalog): a node first
    seen running an image before it existed is quarantined."""
    texts = queries(stack, window_s, at, policy)
    vectors, matrices = _concurrently(prom, texts, at, set(MATRIX))
    matrix = matrices.get("xids", [])
    # reimaged nodes: their raw series again, to split them by image
    idents = _identities(vectors["info"])
    reimaged = sorted(i for i, seen in idents.images.items() if len(seen) > 1)
    chosen = reimaged[: int(policy.max_split_nodes.value)]
    split: dict[str, list[Series]] = {}
    if chosen:
        insts = sorted({inst for i in chosen for inst in idents.instances[i]})
        more = {k: q.format(i=_regex(insts), w=int(window_s)) for k, q in SPLIT.items()}
        split = _concurrently(prom, more, at, set(more))[1]
        texts |= {f"split_{k}": q for k, q in more.items()}
    return build(
        vectors, matrix, at=at, window_s=window_s, policy=policy, queries=texts,
        split=split, split_nodes=set(chosen), created=created,
    )  # fmt: skip


def _concurrently(
    prom: Prometheus, texts: dict[str, str], at: float, matrix_keys: set[str]
) -> tuple[dict[str, list[Sample]], dict[str, list[Series]]]:
    """Every query at once, four at a time, on daemon threads: a command's deadline
    (SIGALRM in this thread) unwinds at once, and no exit waits for a read still in
    flight (each ends by the client's own deadline)."""
    gate = threading.Semaphore(4)
    vectors: dict[str, list[Sample]] = {}
    matrices: dict[str, list[Series]] = {}
    failed: list[BaseException] = []

    def one(key: str, text: str) -> None:
        with gate:
            try:
                if key in matrix_keys:
                    matrices[key] = prom.query_range_vector(text, at)
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
    return vectors, matrices


# -- from answers to nodes ---------------------------------------------------------------


def _finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))


def _shown(s: Sample) -> str:
    return s.raw if s.raw is not None else f"{s.value:g}"


def _ts(t: float) -> str:
    return f"{t:.0f}" if _finite(t) else f"{t:g}"


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


@dataclass
class _Identities:
    ids_of: dict[str, set[str]]  # address -> instance ids it reported
    images: dict[str, set[tuple[str, str]]]  # identity -> (image, shape) it ran
    instances: dict[str, list[str]]  # identity -> addresses
    owner: dict[str, str]  # address -> its one identity
    problems: dict[str, list[str]]


def _identities(info: list[Sample]) -> _Identities:
    """Identities from the info series: instance -> instance id; an address two nodes
    claimed is no identity."""
    ids_of: dict[str, set[str]] = defaultdict(set)
    images: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for s in info:
        inst = s.labels.get("instance", "")
        ident = s.labels.get("instance_id", "") or f"instance:{inst}"
        ids_of[inst].add(ident)
        images[ident].add((s.labels.get("image_id", ""), s.labels.get("shape", "")))
    problems: dict[str, list[str]] = defaultdict(list)
    instances: dict[str, list[str]] = defaultdict(list)
    owner: dict[str, str] = {}
    for inst, idents in ids_of.items():
        for ident in sorted(idents):
            instances[ident].append(inst)
            if len(idents) > 1:
                problems[ident].append(
                    f"address {inst} reported {len(idents)} instance ids in the window"
                )
        if len(idents) == 1:
            owner[inst] = next(iter(idents))
    return _Identities(ids_of, images, instances, owner, problems)


def _boot(values: list[float], shown: list[str]) -> tuple[str, list[str]]:
    """The boot verdict from imagectl_validation_passed's values: none -> unknown (never
    passed), a 0 -> failed, only 1s -> passed; anything else is implausible."""
    if values == [1.0]:  # one node, one series: the common case
        return "passed", []
    bad = [f"boot check passed = {s}" for v, s in zip(values, shown, strict=True)
           if v not in (0.0, 1.0)]  # fmt: skip
    if not values:
        return "unknown", bad
    return ("failed" if 0.0 in values else "passed"), bad


def _drain(worst: list[Sample], problems: list[Sample]) -> tuple[bool, list[str]]:
    drain, issues = False, []
    for s in worst:
        if not (_finite(s.value) and 0 <= s.value <= MAX_RANK and s.value == int(s.value)):
            issues.append(f"worst action = {_shown(s)}")
        elif s.value >= DRAIN_RANK:
            drain = True
    for s in problems:
        if not (_finite(s.value) and 0 <= s.value <= MAX_GPUS and s.value == int(s.value)):
            issues.append(f"GPUs with a hardware problem = {_shown(s)}")
        elif s.value > 0:
            drain = True
    return drain, issues


def _share(read_ok: list[Sample]) -> tuple[float | None, list[str]]:
    """The watcher's read_ok share (None: no read_ok series)."""
    if len(read_ok) == 1 and 0.0 <= read_ok[0].value <= 1.0:
        return read_ok[0].value, []
    share: float | None = None
    issues = []
    for s in read_ok:
        if _finite(s.value) and 0 <= s.value <= 1:
            share = s.value if share is None else min(share, s.value)
        else:
            issues.append(f"watcher read_ok averaged {_shown(s)}")
    return share, issues


def _lag_issues(lag: list[Sample], clock: list[Sample], at: float, policy: Policy) -> list[str]:
    out = []
    for s in lag:
        if _finite(s.value) and s.value > 0:
            out.append(
                f"watcher's last look {s.value:.0f} s before Prometheus's sample time "
                f"(at most {policy.max_look_age_s.value:g}): it stopped looking, or its "
                "clock is behind"
            )
        else:
            out.append(
                f"watcher's look time {_shown(s)} s from Prometheus's sample time (at "
                f"most {policy.max_clock_skew_s.value:g} s ahead): a wrong clock or a "
                "forged time"
            )
    for s in clock:
        when = "after Prometheus's evaluation time" if s.value > at else "before the window"
        out.append(
            f"a watcher look in the window is timestamped {_shown(s)} ({when} {at:.0f}): "
            "a wrong clock or a forged time"
        )
    return out


def _vector_issues(value: Sample, at: float) -> str | None:
    """An instant query's sample is stamped with the evaluation time; any other time (a
    sample from the future, or from long ago) is not Prometheus's answer to this query."""
    if not (_finite(value.at) and abs(value.at - at) <= 1.0):
        return f"a sample stamped {_ts(value.at)}, not the evaluation time {at:.0f}"
    return None


@dataclass
class _Part:
    """One image's share of a node's samples (a reimaged node, split)."""

    passed: list[float] = field(default_factory=list)
    worst: list[Sample] = field(default_factory=list)
    problems: list[Sample] = field(default_factory=list)
    looks: int = 0
    read_ok: list[float] = field(default_factory=list)
    incidents: dict[int, float] = field(default_factory=dict)
    issues: list[str] = field(default_factory=list)


def _split(
    ident: str,
    insts: list[str],
    split: dict[str, list[Series]],
    xids: dict[str, list[tuple[float, float]]],
    base: dict[str, float],
    at: float,
    window_s: int,
    policy: Policy,
) -> dict[tuple[str, str], _Part] | str:
    """A reimaged node's raw samples, each credited to the image it ran at its sample time
    (the latest info sample at or before it, from the same scrape); a reason string where
    that cannot be told."""
    mine = set(insts)

    def of(key: str) -> list[Series]:
        return [s for s in split.get(key, []) if s.labels.get("instance", "") in mine]

    timeline: dict[float, tuple[str, str]] = {}
    for series in of("info"):
        key = (series.labels.get("image_id", ""), series.labels.get("shape", ""))
        for t, _v in series.points:
            if timeline.get(t, key) != key:
                return f"two images at the same sample time {t:.0f}: its samples cannot be split"
            timeline[t] = key
    if not timeline:
        return "its info series' samples could not be read again to split them"
    times = sorted(timeline)
    keys = [timeline[t] for t in times]
    parts = {k: _Part() for k in keys}

    def image_at(t: float) -> tuple[str, str]:
        return keys[max(0, bisect.bisect_right(times, t) - 1)]

    def window_ok(t: float) -> bool:
        return at - window_s - 1 <= t <= at + 1

    for series in of("passed"):
        for t, v in series.points:
            parts[image_at(t)].passed.append(v)
    for name in ("worst", "problems"):
        for series in of(name):
            for t, v in series.points:
                getattr(parts[image_at(t)], name).append(Sample(series.labels, v, t))
    for series in of("read_ok"):
        for t, v in series.points:
            parts[image_at(t)].read_ok.append(v)
    skew, stale = policy.max_clock_skew_s.value, policy.max_look_age_s.value
    for series in of("watch"):
        prev: float | None = None
        for t, v in series.points:
            part = parts[image_at(t)]
            if not (_finite(v) and -skew <= t - v <= stale) or not window_ok(t):
                part.issues.append(
                    f"watcher look at {_ts(v)} in a sample of {t:.0f}: a wrong clock or a "
                    "forged time"
                )
            if v != prev:
                part.looks += 1
            prev = v
    for code, points in xids.items():
        try:
            number = int(code)
        except ValueError:
            continue
        last = base.get(code)
        for t, v in points:
            if not (_finite(v) and v >= 0):
                continue
            add = v if last is None or v < last else v - last
            part = parts[image_at(t)]
            part.incidents[number] = part.incidents.get(number, 0.0) + add
            last = v
    return parts


def build(
    vectors: dict[str, list[Sample]],
    matrix: list[Series],
    *,
    at: float,
    window_s: int,
    policy: Policy,
    queries: dict[str, str] | None = None,
    split: dict[str, list[Series]] | None = None,
    split_nodes: set[str] | None = None,
    created: dict[str, float] | None = None,
) -> Evidence:
    ids = _identities(vectors["info"])
    owner, problems, instances_of = ids.owner, ids.problems, ids.instances
    for s in vectors["info"]:
        inst = s.labels.get("instance", "")
        ident = owner.get(inst)
        if ident is None:
            continue
        if s.value != 1.0:
            problems[ident].append(f"info series = {_shown(s)} (it is always 1)")
        for label in ("image_id", "shape"):
            if not s.labels.get(label, ""):
                problems[ident].append(f"info series without {label}")

    def per_node(key: str) -> dict[str, list[Sample]]:
        out: dict[str, list[Sample]] = defaultdict(list)
        for s in vectors.get(key, []):
            ident = owner.get(s.labels.get("instance", ""))
            if ident is not None:
                out[ident].append(s)
        return out

    lo, hi = at - 1.0, at + 1.0
    for answer, samples in vectors.items():
        if answer == "launched":
            continue
        for s in [s for s in samples if not lo <= s.at <= hi]:  # NaN is never within
            inst = s.labels.get("instance", "")
            if inst in owner and (why := _vector_issues(s, at)) is not None:
                problems[owner[inst]].append(f"{answer}: {why}")
    looks, lag, clock = per_node("looks"), per_node("lag"), per_node("clock")
    read_ok, passed = per_node("read_ok"), per_node("passed")
    worst, gpu_problems = per_node("worst"), per_node("problems")
    base: dict[tuple[str, str], float] = {}
    for s in vectors["xid_base"]:
        inst = s.labels.get("instance", "")
        if (
            inst in owner
            and _finite(s.value)
            and 0 <= s.value <= MAX_COUNT
            and (s.value == int(s.value))
        ):
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

    launches = _launches(vectors["launched"], at, window_s, policy, created or {})
    look_s = policy.look_interval_s.value
    nodes: list[NodeEvidence] = []
    for ident, seen in ids.images.items():
        issues = problems.get(ident, [])
        if len(seen) > 1:
            nodes += _reimaged(ident, seen, issues, ids, split, split_nodes, points, base,
                               codes_of, at, window_s, policy)  # fmt: skip
            continue
        share, share_issues = _share(read_ok.get(ident, []))
        ok_share = 1.0 if share is None else share
        p = passed.get(ident, [])
        boot_issues: list[str]
        if len(p) == 1 and p[0].value == 1.0:
            verdict, boot_issues = "passed", []
        else:
            verdict, boot_issues = _boot([s.value for s in p], [_shown(s) for s in p])
        drain, drain_issues = _drain(worst.get(ident, []), gpu_problems.get(ident, []))
        issues = issues + share_issues + boot_issues + drain_issues
        issues += _lag_issues(lag.get(ident, []), clock.get(ident, []), at, policy)
        counts = [s.value for s in looks.get(ident, [])]
        exposure = 0.0
        most = 2 * window_s / look_s + 2  # a look per interval, twice over for slack
        if not all(_finite(v) and 0 <= v <= most and v == int(v) for v in counts):
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
        ((image_id, shape),) = seen
        node = NodeEvidence(
            node=ident, image_id=image_id, shape=shape,
            instances=sorted(instances_of.get(ident, [])), problems=list(issues),
            boot_verdict=verdict, boot_failed=verdict == "failed", drain=drain,
            exposure_s=round(exposure, 3), watch_ok_share=round(ok_share, 4),
            incidents=incidents,
        )  # fmt: skip
        _settle(node, bool(counts), share is not None, policy)
        nodes.append(node)
    return _account(nodes, launches, queries or {}, at, window_s)


def _settle(node: NodeEvidence, looked: bool, has_read_ok: bool, policy: Policy) -> None:
    """The node's status from what was read of it (its problems already listed)."""
    if node.problems:
        node.status = QUARANTINED
    elif node.boot_verdict == "unknown":
        node.status = NO_VERDICT
        node.problems.append(
            "no boot-check series (imagectl_validation_passed) in the window: its boot "
            "verdict is unknown, never passed"
        )
    elif not looked or node.exposure_s <= 0:
        node.status = BLIND
        node.problems.append("no watcher look in the window")
    elif not has_read_ok:
        node.status = BLIND
        node.problems.append(
            "no imagectl_watch_read_ok series: a watcher that does not say it could read "
            "the log and NVML is blind"
        )
    elif node.watch_ok_share < policy.min_watch_ok_share.value:
        node.status = BLIND
        node.problems.append(
            f"the watcher could read the log and NVML in {node.watch_ok_share:.0%} of its looks"
        )


def _reimaged(
    ident: str,
    seen: set[tuple[str, str]],
    issues: list[str],
    ids: _Identities,
    split: dict[str, list[Series]] | None,
    split_nodes: set[str] | None,
    points: dict[tuple[str, str], list[tuple[float, float]]],
    base: dict[tuple[str, str], float],
    codes_of: dict[str, set[str]],
    at: float,
    window_s: int,
    policy: Policy,
) -> list[NodeEvidence]:
    """A node that ran several images in the window: one record per image, with what
    happened while it ran that image; unknown on every side when that cannot be told."""
    insts = sorted(ids.instances.get(ident, []))
    parts: dict[tuple[str, str], _Part] | str = (
        "more reimaged nodes than policy.max_split_nodes: its samples were not read again"
    )
    if split is not None and split_nodes is not None and ident in split_nodes:
        xids = {c: sorted(points[(ident, c)]) for c in codes_of.get(ident, ())}
        bases = {c: base[(ident, c)] for c in codes_of.get(ident, ()) if (ident, c) in base}
        parts = _split(ident, insts, split, xids, bases, at, window_s, policy)
    out = []
    for image_id, shape in sorted(seen):
        node = NodeEvidence(node=ident, image_id=image_id, shape=shape, instances=insts,
                            problems=list(issues))  # fmt: skip
        if isinstance(parts, str) or (image_id, shape) not in parts:
            why = parts if isinstance(parts, str) else "no sample of it could be read again"
            node.status = REIMAGED
            node.problems.append(
                f"ran {len(seen)} images in the window (reimaged): {why}; unknown for "
                "every image, credited to none"
            )
            out.append(node)
            continue
        part = parts[(image_id, shape)]
        verdict, boot_issues = _boot(part.passed, [f"{v:g}" for v in part.passed])
        drain, drain_issues = _drain(part.worst, part.problems)
        ok = [v for v in part.read_ok if _finite(v) and 0 <= v <= 1]
        bad_ok = [f"watcher read_ok = {v:g}" for v in part.read_ok if v not in ok]
        share = sum(ok) / len(ok) if ok else 1.0
        node.problems += part.issues + boot_issues + drain_issues + bad_ok
        node.boot_verdict, node.boot_failed, node.drain = verdict, verdict == "failed", drain
        node.watch_ok_share = round(share, 4)
        node.exposure_s = round(min(part.looks * policy.look_interval_s.value,
                                    float(window_s)) * share, 3)  # fmt: skip
        node.incidents = {c: min(MAX_COUNT, int(k)) for c, k in sorted(part.incidents.items())}
        _settle(node, part.looks > 0, bool(part.read_ok), policy)
        out.append(node)
    return out


@dataclass
class _Launch:
    ident: str
    image_id: str
    shape: str
    instance: str
    at: float | None
    before_window: bool
    problems: list[str]


def _launches(
    samples: list[Sample], at: float, window_s: int, policy: Policy, created: dict[str, float]
) -> list[_Launch]:
    """The launch records (``up`` with the discovery's labels), each with its launch time:
    the first time Prometheus scraped the target in the window (its own sample time, to
    ``launch_time_step_s``), checked: a time, not after the evaluation, not before the
    first step could see it, not before its image existed."""
    step = policy.launch_time_step_s.value
    skew, stale = policy.max_clock_skew_s.value, policy.max_look_age_s.value
    earliest = at - window_s - stale - step
    out = []
    for s in samples:
        labels = s.labels
        ident = labels.get("imagectl_instance_id", "")
        image_id = labels.get("imagectl_image_id", "")
        shape = labels.get("imagectl_shape", "")
        if not ident or not image_id:
            continue
        issues = []
        when: float | None = s.value
        if (why := _vector_issues(s, at)) is not None:
            issues.append(f"launch record: {why}")
        if not (_finite(s.value) and earliest <= s.value <= at + 1.0):
            issues.append(
                f"launch time {_shown(s)}: not a time between the window's start and the "
                f"evaluation time {at:.0f}"
            )
            when = None
        elif image_id in created and s.value < created[image_id] - skew:
            issues.append(
                f"first seen running {image_id} at {s.value:.0f}, before the image existed "
                f"({created[image_id]:.0f})"
            )
        before = when is not None and when <= at - window_s + step
        out.append(_Launch(ident, image_id, shape, s.labels.get("instance", ""), when,
                           before, issues))  # fmt: skip
    return out


def _account(
    nodes: list[NodeEvidence], launches: list[_Launch], queries: dict[str, str], at: float,
    window_s: int,
) -> Evidence:  # fmt: skip
    """Launch accounting: a launched node that never reported is unknown, never absent;
    each record gets its launch time (from the launch of the same image, else the node's
    first)."""
    by_node: dict[str, list[NodeEvidence]] = defaultdict(list)
    for n in nodes:
        by_node[n.node].append(n)
    for launch in launches:
        one = by_node.get(launch.ident)
        if one is not None and len(one) == 1 and one[0].image_id == launch.image_id:
            n = one[0]  # the common case: one record, this image
            n.launch_record = True
            if launch.at is not None and (n.launched_at is None or launch.at < n.launched_at):
                n.launched_at, n.launched_before_window = launch.at, launch.before_window
            if launch.problems:
                n.problems += launch.problems
                n.status = n.status if n.status != "ok" else QUARANTINED
            continue
        # a node whose validator wrote no instance id is known by its address
        known = launch.ident if launch.ident in by_node else f"instance:{launch.instance}"
        if known in by_node and not any(
            n.image_id in (launch.image_id, "") for n in by_node[known]
        ):
            # the cloud says it runs an image its own series never named: counted on the
            # cloud's side, as unknown
            wrong = NodeEvidence(
                node=known, image_id=launch.image_id, shape=launch.shape, status=QUARANTINED,
                launch_record=True, launched_at=launch.at,
                launched_before_window=launch.before_window, boot_verdict="unknown",
                problems=[f"launched with {launch.image_id} (the cloud's instance list), but "
                          "its info series names "
                          + ", ".join(sorted(n.image_id for n in by_node[known])),
                          *launch.problems],
            )  # fmt: skip
            by_node[known].append(wrong)
            nodes.append(wrong)
            continue
        if known in by_node:
            records = by_node[known]
            same = [n for n in records if n.image_id in (launch.image_id, "")] or records
            for n in same:
                n.launch_record = True
                if not n.image_id or not n.shape:  # quarantined: counted on the cloud's side
                    n.image_id, n.shape = n.image_id or launch.image_id, n.shape or launch.shape
                if launch.at is not None and (n.launched_at is None or launch.at < n.launched_at):
                    n.launched_at, n.launched_before_window = launch.at, launch.before_window
                if launch.problems:
                    n.problems += launch.problems
                    n.status = n.status if n.status != "ok" else QUARANTINED
            continue
        never = NodeEvidence(
            node=launch.ident, image_id=launch.image_id, shape=launch.shape, status=NEVER,
            launch_record=True, launched_at=launch.at,
            launched_before_window=launch.before_window,
            problems=["launched (the cloud's instance list) but never reported", *launch.problems],
            boot_verdict="unknown",
        )  # fmt: skip
        by_node[launch.ident].append(never)
        nodes.append(never)
    return Evidence(nodes, len(launches), queries, at, window_s)
