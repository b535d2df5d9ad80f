"""The decision rule: per shape, the canary's nodes against its predecessor's.

Stated once (the README says the same):

1. **Minimum sample** (``policy.yaml``): at least ``min_canary_nodes`` canary nodes and
   ``min_baseline_nodes`` predecessor nodes of the shape, and ``min_canary_node_hours`` of
   watched canary exposure; otherwise **hold**. So is a shape with no canary or no
   predecessor nodes at all, and Prometheus unreachable (decided by the caller).
2. **Events per node-hour**, for each Xid class: the conditional binomial test on two
   Poisson counts (``stats.poisson_rate_p``), one-sided.
3. **Failing nodes**, for each node class (boot check failed; drain): Fisher's exact test
   (``stats.fisher_greater_p``), one-sided.
4. A comparison **fails** when its p-value is below ``alpha`` divided by the number of
   comparisons (Bonferroni) *and* the canary is worse by a practical margin: a smoothed
   rate ratio of at least ``min_rate_ratio``, or a share of failing nodes higher by at
   least ``min_excess_fraction``.
5. Any failing comparison: **roll back**. Otherwise, with the minimum sample met:
   **advance**.

Over shapes: any shape rolls back -> roll back; else any shape holds -> hold; else advance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from imagectl.rollout.fleet import Node
from imagectl.rollout.policy import Policy
from imagectl.rollout.stats import fisher_greater_p, poisson_rate_p

ADVANCE, HOLD, ROLLBACK = "advance", "hold", "rollback"


@dataclass
class Group:
    nodes: int = 0
    watched: int = 0
    node_hours: float = 0.0
    boot_check_failed: int = 0
    drain: int = 0
    events: dict[str, int] = field(default_factory=dict)


@dataclass
class Comparison:
    name: str
    kind: str  # rate | proportion
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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def group_of(nodes: list[Node], policy: Policy) -> Group:
    g = Group(nodes=len(nodes))
    for cls in policy.xid_classes:
        g.events[cls.name] = 0
    for n in nodes:
        g.boot_check_failed += n.boot_failed
        g.drain += n.drain
        hours = n.node_hours
        if hours is None:
            continue
        g.watched += 1
        g.node_hours += hours
        for cls in policy.xid_classes:
            g.events[cls.name] += int(sum(n.xids.get(code, 0) for code in cls.codes))
    g.node_hours = round(g.node_hours, 3)
    return g


def _compare(c: Group, b: Group, policy: Policy) -> list[Comparison]:
    threshold = policy.alpha.value / policy.comparisons
    out = []
    for cls in policy.xid_classes:
        kc, kb = c.events[cls.name], b.events[cls.name]
        p = poisson_rate_p(kc, c.node_hours, kb, b.node_hours)
        rate_c = kc / c.node_hours if c.node_hours else 0.0
        rate_b = kb / b.node_hours if b.node_hours else 0.0
        ratio = ((kc + 0.5) / c.node_hours) / ((kb + 0.5) / b.node_hours) if b.node_hours else 0.0
        failed = p < threshold and ratio >= policy.min_rate_ratio.value
        out.append(Comparison(cls.name, "rate", rate_c, rate_b, p, threshold, ratio, failed))
    for name, fc, fb in (
        ("boot_check_failed", c.boot_check_failed, b.boot_check_failed),
        ("drain", c.drain, b.drain),
    ):
        p = fisher_greater_p(fc, c.nodes, fb, b.nodes)
        share_c, share_b = fc / c.nodes, fb / b.nodes
        excess = share_c - share_b
        failed = p < threshold and excess >= policy.min_excess_fraction.value
        out.append(Comparison(name, "proportion", share_c, share_b, p, threshold, excess, failed))
    return out


def decide_shape(
    shape: str, canary: list[Node], baseline: list[Node], policy: Policy
) -> ShapeDecision:
    c, b = group_of(canary, policy), group_of(baseline, policy)
    short = []
    if c.nodes < policy.min_canary_nodes.value:
        short.append(f"{c.nodes} canary node(s), fewer than {policy.min_canary_nodes.value:g}")
    if b.nodes < policy.min_baseline_nodes.value:
        short.append(
            f"{b.nodes} predecessor node(s), fewer than {policy.min_baseline_nodes.value:g}"
        )
    if c.node_hours < policy.min_canary_node_hours.value:
        short.append(
            f"{c.node_hours:g} watched canary node-hours, fewer than "
            f"{policy.min_canary_node_hours.value:g}"
        )
    if short:
        return ShapeDecision(shape, HOLD, "; ".join(short), c, b)
    comparisons = _compare(c, b, policy)
    bad = [x for x in comparisons if x.failed]
    if bad:
        reason = "; ".join(
            f"{x.name}: canary {x.canary:.4g} vs predecessor {x.baseline:.4g} "
            f"({'ratio' if x.kind == 'rate' else 'excess'} {x.effect:.3g}, p={x.p_value:.2g} "
            f"< {x.threshold:.2g})"
            for x in bad
        )
        return ShapeDecision(shape, ROLLBACK, reason, c, b, comparisons)
    return ShapeDecision(
        shape, ADVANCE, "no comparison shows the canary worse than its predecessor", c, b,
        comparisons,
    )  # fmt: skip


def decide(
    nodes: list[Node], candidate_ids: set[str], baseline_ids: set[str], policy: Policy
) -> tuple[str, str, list[ShapeDecision]]:
    """(decision, reason, per-shape decisions) for the nodes of one stack."""
    shapes = sorted({n.shape for n in nodes if n.image_id in candidate_ids | baseline_ids})
    per_shape = [
        decide_shape(
            shape,
            [n for n in nodes if n.shape == shape and n.image_id in candidate_ids],
            [n for n in nodes if n.shape == shape and n.image_id in baseline_ids],
            policy,
        )
        for shape in shapes
    ]
    if not per_shape:
        return HOLD, "no node of the candidate or its predecessor in the window", []
    for verdict in (ROLLBACK, HOLD):
        hit = [d for d in per_shape if d.decision == verdict]
        if hit:
            return verdict, "; ".join(f"{d.shape}: {d.reason}" for d in hit), per_shape
    return ADVANCE, "every shape: " + per_shape[0].reason, per_shape
