"""The rollout's decision rule on numbers: the exact tests against values computed by hand
(and by SciPy's documented examples), and every outcome of ``decide`` (advance, hold for
each missing minimum and for too many unknown nodes, roll back for a rate and for a
proportion), on the evidence model's nodes."""

from __future__ import annotations

import math

import pytest

from imagectl.rollout.decide import ADVANCE, HOLD, ROLLBACK, decide
from imagectl.rollout.evidence import BLIND, NEVER, QUARANTINED, REIMAGED, NodeEvidence
from imagectl.rollout.policy import load_policy
from imagectl.rollout.stats import binomial_upper_p, fisher_greater_p, poisson_rate_p

POLICY = load_policy()
NOW = 1_800_000_000.0


def test_binomial_upper_tail_by_hand() -> None:
    for n, p in ((10, 0.5), (7, 0.3), (30, 0.05)):
        for k in range(n + 2):
            direct = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
            assert binomial_upper_p(k, n, p) == pytest.approx(direct, rel=1e-9, abs=1e-15)


def test_poisson_rates() -> None:
    assert poisson_rate_p(10, 100.0, 0, 100.0) == pytest.approx(0.5**10)
    assert poisson_rate_p(0, 100.0, 5, 100.0) == 1.0
    assert poisson_rate_p(3, 100.0, 3, 100.0) > 0.5  # equal rates: nothing to see
    assert poisson_rate_p(5, 0.0, 1, 10.0) == 1.0  # no exposure: no evidence


def test_fisher_one_sided() -> None:
    # the lady tasting tea: [[3, 1], [1, 3]], one-sided p = 17/70 (Fisher 1935)
    assert fisher_greater_p(3, 4, 1, 4) == pytest.approx(17 / 70)
    # [[6, 2], [1, 4]]: (C(7,6) C(6,2) + C(7,7) C(6,1)) / C(13,8) = 111/1287
    assert fisher_greater_p(6, 8, 1, 5) == pytest.approx(111 / 1287)
    assert fisher_greater_p(0, 10, 5, 10) == pytest.approx(1.0)


def _nodes(image: str, n: int, *, hours: float = 48.0, xids: int = 0, failed: int = 0,
           drain: int = 0, shape: str = "p5.48xlarge") -> list[NodeEvidence]:  # fmt: skip
    return [
        NodeEvidence(
            node=f"{image}-{shape}-{i}",
            image_id=image,
            shape=shape,
            boot_failed=i < failed,
            drain=i < drain,
            exposure_s=hours * 3600,
            incidents={79: xids} if xids else {},
        )
        for i in range(n)
    ]


def test_a_healthy_canary_advances() -> None:
    nodes = _nodes("new", 6) + _nodes("old", 20, xids=1)[:20]
    decision, reason, shapes = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == ADVANCE, reason
    (shape,) = shapes
    assert shape.canary.nodes == 6 and shape.canary.node_hours == pytest.approx(288)
    assert shape.baseline.events["gpu_lost"] == 20
    assert not any(c.failed for c in shape.comparisons)


def test_xid_79_at_several_times_the_rate_rolls_back() -> None:
    nodes = _nodes("new", 8, xids=2) + _nodes("old", 8)
    nodes[-1].incidents = {79: 1}
    decision, reason, shapes = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == ROLLBACK and "gpu_lost" in reason
    (bad,) = [c for c in shapes[0].comparisons if c.failed]
    assert bad.name == "gpu_lost" and bad.p_value < POLICY.alpha_at(1) / POLICY.comparisons


def test_a_small_rise_is_not_a_rollback() -> None:
    """Significant on a huge fleet, yet under min_rate_ratio: practical significance."""
    nodes = _nodes("new", 500, xids=3) + _nodes("old", 500, xids=2)
    assert decide(nodes, {"new"}, {"old"}, POLICY)[0] == ADVANCE


def test_boot_check_failures_roll_back_as_a_proportion() -> None:
    nodes = _nodes("new", 10, failed=8) + _nodes("old", 10)
    decision, reason, _ = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == ROLLBACK and "boot_check_failed" in reason
    # 6 of 10 against none: p = C(14,4)/C(20,10) = 0.0054, not below 0.005/6 (the first
    # look spends alpha/2; Bonferroni over the 6 comparisons)
    nodes = _nodes("new", 10, failed=6) + _nodes("old", 10)
    assert decide(nodes, {"new"}, {"old"}, POLICY)[0] == ADVANCE


@pytest.mark.parametrize(
    ("canary", "baseline", "words"),
    [
        (2, 10, "2 canary node(s), fewer than 5"),
        (6, 3, "3 predecessor node(s), fewer than 5"),
        (0, 10, "0 canary node(s)"),
    ],
)
def test_too_little_data_holds(canary: int, baseline: int, words: str) -> None:
    nodes = _nodes("new", canary, xids=5) + _nodes("old", baseline)
    decision, reason, _ = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == HOLD and words in reason


def test_too_few_node_hours_hold_even_with_events() -> None:
    nodes = _nodes("new", 6, hours=2.0, xids=1) + _nodes("old", 6)
    decision, reason, _ = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == HOLD and "node-hours" in reason


def test_unwatched_nodes_add_no_exposure() -> None:
    nodes = _nodes("new", 6, hours=0.0) + _nodes("old", 6)
    decision, reason, shapes = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == HOLD and shapes[0].canary.node_hours == 0 and "node-hours" in reason


@pytest.mark.parametrize("status", [NEVER, QUARANTINED, REIMAGED, BLIND])
def test_unknown_nodes_hold_and_are_named(status: str) -> None:
    """Unknown is never healthy: 2 of 12 canary nodes unknown (17 %, above 10 %) holds a
    canary that would otherwise advance, and names them."""
    nodes = _nodes("new", 12) + _nodes("old", 12)
    for n in nodes[:2]:
        n.status, n.problems = status, [f"made {status}"]
    decision, reason, (shape,) = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == HOLD and "2 of 12 canary node(s) unknown" in reason
    assert "new-p5.48xlarge-0" in reason and status in reason
    assert (shape.canary.launched, shape.canary.unknown, shape.canary.nodes) == (12, 2, 10)
    assert shape.canary.reporting == (10 if status == NEVER else 12)
    # one in twelve is within the limit: it neither holds nor moves the decision
    nodes[1].status = "ok"
    assert decide(nodes, {"new"}, {"old"}, POLICY)[0] == ADVANCE
    # the same on the predecessor's side
    nodes = _nodes("new", 12) + _nodes("old", 12)
    for n in nodes[12:14]:
        n.status = status
    assert decide(nodes, {"new"}, {"old"}, POLICY)[0] == HOLD


def test_a_reimaged_node_that_cannot_be_split_is_unknown_on_both_sides() -> None:
    """Reimaged in place, its samples not split by image (evidence.py splits them where it
    can, tests/fleet/test_evidence_reimage.py): unknown for each image it ran, its failed
    boot check credited to neither side (the failure may have been on the predecessor)."""
    nodes = _nodes("new", 10) + _nodes("old", 10)
    for n in nodes[:2]:
        n.status, n.boot_failed, n.problems = REIMAGED, True, ["ran 2 images"]
        nodes.append(NodeEvidence(node=n.node, image_id="old", shape=n.shape, status=REIMAGED,
                                  boot_failed=True, problems=["ran 2 images"]))  # fmt: skip
    decision, reason, (shape,) = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == HOLD and "2 of 10 canary node(s) unknown" in reason, reason
    assert (shape.canary.unknown, shape.baseline.unknown) == (2, 2)
    assert shape.canary.boot_check_failed == 0 == shape.baseline.boot_check_failed


def test_later_looks_spend_less_alpha() -> None:
    """alpha / (k (k + 1)) at the k-th look: the sum over every look is alpha."""
    assert POLICY.alpha_at(1) == pytest.approx(POLICY.alpha.value / 2)
    assert sum(POLICY.alpha_at(k) for k in range(1, 100_000)) == pytest.approx(
        POLICY.alpha.value, rel=1e-4
    )
    # a rise significant at the first look is not at the hundredth
    nodes = _nodes("new", 8, xids=2) + _nodes("old", 8)
    nodes[-1].incidents = {79: 1}
    assert decide(nodes, {"new"}, {"old"}, POLICY, look=1)[0] == ROLLBACK
    _, _, (shape,) = decide(nodes, {"new"}, {"old"}, POLICY, look=100)
    (gpu_lost,) = [c for c in shape.comparisons if c.name == "gpu_lost"]
    assert gpu_lost.threshold == pytest.approx(POLICY.alpha.value / (100 * 101) / 6)


def test_no_launch_record_holds() -> None:
    nodes = _nodes("new", 6) + _nodes("old", 6)
    for n in nodes:
        n.launch_record = True
    assert decide(nodes, {"new"}, {"old"}, POLICY, launch_records=12)[0] == ADVANCE
    for n in nodes[:6]:
        n.launch_record = False  # records for other images only
    decision, reason, _ = decide(nodes, {"new"}, {"old"}, POLICY, launch_records=6)
    assert decision == HOLD and "no launch record" in reason


def test_a_huge_count_is_a_few_terms_not_a_billion() -> None:
    """1e9 events (a node's forged counter, were it not quarantined) decide in milliseconds."""
    assert poisson_rate_p(10**9, 100.0, 10**9, 100.0) == pytest.approx(0.5, abs=0.01)
    assert binomial_upper_p(10**9, 10**9, 0.5) == 0.0


def test_a_shape_without_canary_nodes_holds_the_whole_rollout() -> None:
    nodes = _nodes("new", 6) + _nodes("old", 6) + _nodes("old", 6, shape="a3-highgpu-8g")
    decision, reason, shapes = decide(nodes, {"new"}, {"old"}, POLICY)
    assert decision == HOLD and "a3-highgpu-8g" in reason
    assert {s.shape: s.decision for s in shapes} == {"p5.48xlarge": ADVANCE, "a3-highgpu-8g": HOLD}


def test_no_nodes_at_all_hold() -> None:
    assert decide([], {"new"}, {"old"}, POLICY)[0] == HOLD


def test_every_threshold_has_a_reason() -> None:
    data = POLICY.model_dump()
    for key, value in data.items():
        if isinstance(value, dict):
            assert value["reason"].strip(), key
    for cls in (*POLICY.xid_classes, *POLICY.node_classes):
        assert cls.reason.strip()
