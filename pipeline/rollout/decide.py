"""The decision rule: per shape, the canary's nodes against its predecessor's, on evidence
(``evidence.py``). Stated once (the README says the same; thresholds in ``policy.yaml``):

1. **Every launched node counts.** Per side of a shape: nodes launched (the launch records,
   plus any that report without one), reporting, and unknown (never reporting,
   quarantined, reimaged, blind). More than ``max_unknown_fraction`` unknown on either side:
   **hold**, naming the nodes. Without launch records for the canary
   (``require_launch_record``): **hold**.
2. **Minimum sample** over the known nodes: ``min_canary_nodes`` and
   ``min_baseline_nodes``, otherwise **hold**; and ``min_canary_node_hours`` of watched
   canary exposure, below which the rates are not tested (the node classes are) and the
   best it can do is **hold**. A node reimaged in the window counts on each side for
   what happened while it ran that side's image (``evidence.py`` splits its samples), or
   as unknown on both sides where they cannot be split; never on the wrong side.
3. **Events per node-hour**, per Xid class: the conditional binomial test on two Poisson
   counts (``stats.poisson_rate_p``), one-sided. **Failing nodes** (boot check failed;
   drain): Fisher's exact test (``stats.fisher_greater_p``), one-sided. A node without a
   boot-check series is unknown (its verdict is not "passed").
4. **Repeated looks**: the ``look``-th tested look spends ``alpha / (look (look + 1))``
   (``policy.sequential``), divided among the shape's comparisons (Bonferroni). A
   comparison **fails** when its p-value is below that *and* the canary is worse by a
   practical margin (``min_rate_ratio``, ``min_excess_fraction``).
5. Any failing comparison: **roll back**. Otherwise: **advance**.

Over shapes: any shape rolls back -> roll back; else any shape holds -> hold; else
advance. A regression on one shape blocks even when the pooled fleet looks fine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from imagectl.rollout.evidence import NEVER, NodeEvidence
from imagectl.rollout.policy import Policy
from imagectl.rollout.stats import fisher_greater_p, poisson_rate_p

ADVANCE, HOLD, ROLLBACK = "advance", "hold", "rollback"
NAMED = 10  # unknown nodes named per side in a reason (all are in --json)


@dataclass
class Group:
    launched: int = 0
    reporting: int = 0
    unknown: int = 0
    nodes: int = 0  # known: the ones the tests count
    node_hours: float = 0.0
    boot_check_failed: int = 0
    drain: int = 0
    events: dict[str, int] = field(default_factory=dict)
    unknown_nodes: list[dict[str, object]] = field(default_factory=list)

    @property
    def unknown_fraction(self) -> float:
        return self.unknown / self.launched if self.launched else 0.0


@dataclass
class Comparison:
    name: str
    kind: str  # rate | proportion
    test: str
    canary: float
    baseline: float
    p_value: float
    threshold: float
    effect: float  # rate ratio or excess share
    failed: bool


@dataclass
class ShapeDecision:
    shape: str
    decision: str
    reason: str
    canary: Group
    baseline: Group
    comparisons: list[Comparison] = field(default_factory=list)
    tested: bool = False  # a comparison could have failed: this look spent alpha

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def group_of(nodes: list[NodeEvidence], policy: Policy) -> Group:
    g = Group(launched=len(nodes))
    for cls in policy.xid_classes:
        g.events[cls.name] = 0
    for n in nodes:
        g.reporting += n.status != NEVER
        if not n.known:
            g.unknown += 1
            g.unknown_nodes.append(
                {"node": n.node, "status": n.status, "why": "; ".join(n.problems)}
            )
            continue
        g.nodes += 1
        g.boot_check_failed += n.boot_failed
        g.drain += n.drain
        g.node_hours += n.node_hours
        for cls in policy.xid_classes:
            g.events[cls.name] += sum(n.incidents.get(code, 0) for code in cls.codes)
    g.node_hours = round(g.node_hours, 3)
    return g


def _compare(c: Group, b: Group, policy: Policy, look: int) -> list[Comparison]:
    threshold = policy.alpha_at(look) / policy.comparisons
    out = []
    for cls in policy.xid_classes:
        kc, kb = c.events[cls.name], b.events[cls.name]
        p = poisson_rate_p(kc, c.node_hours, kb, b.node_hours)
        rate_c = kc / c.node_hours if c.node_hours else 0.0
        rate_b = kb / b.node_hours if b.node_hours else 0.0
        ratio = (
            ((kc + 0.5) / c.node_hours) / ((kb + 0.5) / b.node_hours)
            if b.node_hours and c.node_hours else 0.0
        )  # fmt: skip
        failed = p < threshold and ratio >= policy.min_rate_ratio.value
        out.append(
            Comparison(cls.name, "rate", "conditional binomial (two Poisson rates)", rate_c,
                       rate_b, p, threshold, ratio, failed)
        )  # fmt: skip
    for name, fc, fb in (
        ("boot_check_failed", c.boot_check_failed, b.boot_check_failed),
        ("drain", c.drain, b.drain),
    ):
        p = fisher_greater_p(fc, c.nodes, fb, b.nodes)
        share_c, share_b = fc / c.nodes, fb / b.nodes
        excess = share_c - share_b
        failed = p < threshold and excess >= policy.min_excess_fraction.value
        out.append(
            Comparison(name, "proportion", "Fisher exact, one-sided", share_c, share_b, p,
                       threshold, excess, failed)
        )  # fmt: skip
    return out


def _named(side: str, g: Group) -> str:
    shown = ", ".join(f"{u['node']} ({u['status']})" for u in g.unknown_nodes[:NAMED])
    more = f" and {g.unknown - NAMED} more" if g.unknown > NAMED else ""
    return (
        f"{g.unknown} of {g.launched} {side} node(s) unknown ({g.unknown_fraction:.0%}, "
        f"more than allowed): {shown}{more}"
    )


def decide_shape(
    shape: str,
    canary: list[NodeEvidence],
    baseline: list[NodeEvidence],
    policy: Policy,
    look: int = 1,
) -> ShapeDecision:
    c, b = group_of(canary, policy), group_of(baseline, policy)
    limit = policy.max_unknown_fraction.value
    short = [_named(side, g) for side, g in (("canary", c), ("predecessor", b))
             if g.unknown_fraction > limit]  # fmt: skip
    if c.nodes < policy.min_canary_nodes.value:
        short.append(f"{c.nodes} canary node(s), fewer than {policy.min_canary_nodes.value:g}")
    if b.nodes < policy.min_baseline_nodes.value:
        short.append(
            f"{b.nodes} predecessor node(s), fewer than {policy.min_baseline_nodes.value:g}"
        )
    comparisons = _compare(c, b, policy, look) if c.nodes and b.nodes else []
    if short:
        for x in comparisons:
            x.failed = False  # not tested: the minimum is not met
        return ShapeDecision(shape, HOLD, "; ".join(short), c, b, comparisons)
    if c.node_hours < policy.min_canary_node_hours.value:
        # too little exposure for the rates: they are not tested; the node classes are
        short.append(
            f"{c.node_hours:g} watched canary node-hours, fewer than "
            f"{policy.min_canary_node_hours.value:g}"
        )
        for x in comparisons:
            if x.kind == "rate":
                x.failed = False
    bad = [x for x in comparisons if x.failed]
    if bad:
        reason = "; ".join(
            f"{x.name}: canary {x.canary:.4g} vs predecessor {x.baseline:.4g} "
            f"({'ratio' if x.kind == 'rate' else 'excess'} {x.effect:.3g}, p={x.p_value:.2g} "
            f"< {x.threshold:.2g})"
            for x in bad
        )
        return ShapeDecision(shape, ROLLBACK, reason, c, b, comparisons, tested=True)
    if short:
        return ShapeDecision(shape, HOLD, "; ".join(short), c, b, comparisons, tested=True)
    return ShapeDecision(
        shape, ADVANCE, "no comparison shows the canary worse than its predecessor", c, b,
        comparisons, tested=True,
    )  # fmt: skip


def decide(
    nodes: list[NodeEvidence],
    candidate_ids: set[str],
    baseline_ids: set[str],
    policy: Policy,
    *,
    look: int = 1,
    launch_records: int | None = None,
) -> tuple[str, str, list[ShapeDecision]]:
    """(decision, reason, per-shape decisions) for the nodes of one stack. ``look``: the
    how-manieth tested look at this candidate; ``launch_records``: how many launched nodes
    the cloud's instance list gave (None: not asked)."""
    ids = candidate_ids | baseline_ids
    shapes = sorted({n.shape for n in nodes if n.image_id in ids})
    per_shape = [
        decide_shape(
            shape,
            [n for n in nodes if n.shape == shape and n.image_id in candidate_ids],
            [n for n in nodes if n.shape == shape and n.image_id in baseline_ids],
            policy,
            look,
        )
        for shape in shapes
    ]
    if not per_shape:
        return HOLD, "no node of the candidate or its predecessor in the window", []
    hit = [d for d in per_shape if d.decision == ROLLBACK]
    if hit:
        return ROLLBACK, "; ".join(f"{d.shape}: {d.reason}" for d in hit), per_shape
    launched = any(n.launch_record for n in nodes if n.image_id in candidate_ids)
    if launch_records is not None and not launched and policy.require_launch_record.value:
        return (
            HOLD,
            "no launch record for any node (the cloud's instance list, as the scrape "
            "targets' up series with imagectl_instance_id, imagectl_image_id and "
            "imagectl_shape relabelled from service discovery): a node that never reports "
            "could not be counted",
            per_shape,
        )
    hit = [d for d in per_shape if d.decision == HOLD]
    if hit:
        return HOLD, "; ".join(f"{d.shape}: {d.reason}" for d in hit), per_shape
    return ADVANCE, "every shape: " + per_shape[0].reason, per_shape
