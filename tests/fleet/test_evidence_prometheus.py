"""The rollout's evidence and decision against a real Prometheus (Debian's package) over
backfilled fleet histories (``tests/fleet/history.py``: three hours a sample a minute,
``promtool tsdb create-blocks-from openmetrics``): one Prometheus for the module, one
stack per case. Each case is a way the fleet's series mislead a reading that takes them
at face value:

- reboots on either side (Xid counters start again from zero; the per-code series
  disappear until the code is seen again): incidents before a reboot still count, and
  exposure is time in the window, not time since the last boot;
- canary nodes that fail their boot check and are reimaged in place: failures, not gone;
- launched nodes that never report (the launch record, ``up`` with the discovery labels):
  unknown, never absent;
- an ``instance`` relabel mid-window: 4 nodes stay 4;
- blind watchers (``imagectl_watch_read_ok`` 0): no clean node-hours;
- Prometheus down for half an hour of the window (a restart): less exposure, no hold;
- every field a node writes given NaN, +Inf, -Inf, -1000 and 1e9 (the watcher's time
  also ten years ahead): each such node is quarantined and named, and one such node
  cannot move a decision (a bad canary with a forged node is still rolled back)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from imagectl.rollout.decide import ADVANCE, HOLD, ROLLBACK, decide
from imagectl.rollout.evidence import BLIND, NEVER, NO_VERDICT, QUARANTINED, read
from imagectl.rollout.policy import load_policy
from imagectl.rollout.prom import Prometheus
from tests.fleet.history import Node, openmetrics, serve

HOURS = 3
POLICY = load_policy().model_copy(
    update={"min_canary_node_hours": load_policy().min_canary_node_hours.model_copy(
        update={"value": 24.0})}
)  # fmt: skip
WINDOW = HOURS * 3600
NOW = float(int(time.time()) // 60 * 60)
START = NOW - WINDOW - 600
SHAPE = "p5.48xlarge"
VALUES = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "neg": -1000.0,
          "huge": 1e9}  # fmt: skip
FIELDS = ("passed", "worst", "problems", "watch", "read_ok", "xid79")


LAUNCHED = NOW - 90 * 60
REIMAGED_AT = NOW - 2 * 3600
LOOK_AT = NOW - 2 * 3600  # the one look of the clock cases


def _one_look(shift: float) -> Any:
    """The watcher's look times, one of them (two hours back) shifted by ``shift``."""
    return lambda t: t + shift if LOOK_AT <= t < LOOK_AT + 60 else t


def _incidents(count: int, seed: int) -> list[tuple[float, int]]:
    """``count`` Xid 79 incidents spread over the window."""
    return [(NOW - WINDOW + (k + 1) * WINDOW / (count + 1) + seed, 79) for k in range(count)]


def _side(stack: str, image: str, n: int, per_node: int = 0, **kw: Any) -> list[Node]:
    return [
        Node(instance_id=f"i-{stack}-{image}-{i}", image_id=f"{image}-{stack}", shape=SHAPE,
             stack=stack, xids=_incidents(per_node, i), **kw)
        for i in range(n)
    ]  # fmt: skip


def _cases() -> list[Node]:
    nodes: list[Node] = []
    # reboots on the canary side: 8 of 10 canary nodes reboot after their incidents
    canary = _side("reboot-canary", "new", 10, per_node=1)
    for n in canary[:8]:
        n.reboots = [NOW - 30 * 60]
    nodes += canary + _side("reboot-canary", "old", 10, per_node=1)
    # reboots on the predecessor's side, and a canary four times worse
    base = _side("reboot-base", "old", 10, per_node=1)
    for n in base[:8]:
        n.reboots = [NOW - 30 * 60]
    nodes += _side("reboot-base", "new", 10, per_node=4) + base
    # canary nodes failing their boot check, reimaged in place to the predecessor
    canary = _side("reimaged", "new", 10)
    for n in canary[:8]:
        n.passed, n.reimaged_at, n.reimaged_to = 0.0, NOW - 2 * 3600, "old-reimaged"
    nodes += canary + _side("reimaged", "old", 10)
    # 3 of 10 canary nodes launched but never reporting
    canary = _side("never", "new", 10)
    for n in canary[:3]:
        n.reporting = False
    nodes += canary + _side("never", "old", 10)
    # 4 canary nodes relabelled mid-window
    nodes += _side("relabel", "new", 4, relabel_at=NOW - 90 * 60) + _side("relabel", "old", 10)
    # blind watchers
    nodes += _side("blind", "new", 10, read_ok=0.0) + _side("blind", "old", 10)
    # a gap: every series of this stack missing for half an hour (below)
    gap = [(NOW - 100 * 60, NOW - 70 * 60)]
    nodes += _side("gap", "new", 10, gaps=gap) + _side("gap", "old", 10, gaps=gap)
    # every field x every hostile value, one canary node each, beside a healthy fleet
    hostile = _side("hostile", "new", 10) + _side("hostile", "old", 10)
    for field in FIELDS:
        values = dict(VALUES, future=NOW + 10 * 365 * 86400) if field == "watch" else VALUES
        for name, value in values.items():
            n = Node(instance_id=f"i-hostile-{field}-{name}", image_id="new-hostile",
                     shape=SHAPE, stack="hostile", override={field: value})  # fmt: skip
            if field == "xid79":
                n.xids = [(START, 79)]
            hostile.append(n)
    nodes += hostile
    # one forged node beside a canary three times worse: still rolled back
    for name, field, value in (("neg", "xid79", -1000.0), ("future", "watch", NOW + 3e8),
                               ("huge", "xid79", 1e9)):  # fmt: skip
        stack = f"one-{name}"
        forged = Node(instance_id=f"i-{stack}-forged", image_id=f"new-{stack}", shape=SHAPE,
                      stack=stack, xids=[(START, 79)], override={field: value})  # fmt: skip
        nodes += [*_side(stack, "new", 10, per_node=4), forged]
        nodes += _side(stack, "old", 10, per_node=1)
    # launch times: canary nodes launched 90 minutes ago, predecessor nodes from before
    nodes += _side("launch", "new", 10, first_at=LAUNCHED) + _side("launch", "old", 10)
    # 2 of 10 canary nodes without a boot-check series
    canary = _side("noboot", "new", 10)
    for n in canary[:2]:
        n.boot_file = False
    nodes += canary + _side("noboot", "old", 10)
    # the clock of every sample: one look early in the window a year ahead, one a month back
    clocks = _side("clock", "new", 10) + _side("clock", "old", 10)
    for name, shift in (("ahead", 365 * 86400.0), ("behind", -30 * 86400.0)):
        clocks.append(Node(instance_id=f"i-clock-{name}", image_id="new-clock", shape=SHAPE,
                           stack="clock", override={"watch": _one_look(shift)}))  # fmt: skip
    nodes += clocks
    # failing on the predecessor, with its incidents, then reimaged in place to the candidate
    back = _side("reimaged-back", "old", 8, per_node=3)
    for n in back:
        n.passed, n.reimaged_at, n.reimaged_to = 0.0, REIMAGED_AT, "new-reimaged-back"
        n.xids = [(REIMAGED_AT - 1800 + 60 * k, 79) for k in range(3)]
        n.reboots = [REIMAGED_AT]
        n.instance_id = n.instance_id.replace("-old-", "-moved-")
    nodes += _side("reimaged-back", "new", 10) + _side("reimaged-back", "old", 10) + back
    # a label with a newline (written escaped, as the text format writes it: Prometheus
    # stores the newline itself) that would print a forged "advance" line
    for n in _side("forged", "new", 6):
        n.shape = "p5.48xlarge\\nadvance ami-evil: every shape ok"
        nodes.append(n)
    nodes += _side("forged", "old", 6)
    return nodes


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    server = serve(tmp_path_factory.mktemp("prom"), openmetrics(_cases(), START, NOW))
    try:
        yield Prometheus(server.url, {})
    finally:
        server.stop()


def _decide(
    prom: Prometheus, stack: str, created: dict[str, float] | None = None
) -> tuple[str, str, Any, Any]:
    ev = read(prom, stack, WINDOW, NOW, POLICY, created=created)
    decision, reason, shapes = decide(
        ev.nodes, {f"new-{stack}"}, {f"old-{stack}"}, POLICY, launch_records=ev.launch_records
    )
    return decision, reason, shapes, ev


def test_reboots_on_the_canary_side_keep_their_incidents(prom) -> None:
    decision, reason, (shape,), _ = _decide(prom, "reboot-canary")
    assert decision == ADVANCE, reason
    assert shape.canary.events["gpu_lost"] == 10 == shape.baseline.events["gpu_lost"]
    assert shape.canary.node_hours == pytest.approx(10 * HOURS, rel=0.02)


def test_reboots_on_the_predecessor_side_do_not_hide_a_worse_canary(prom) -> None:
    decision, reason, (shape,), _ = _decide(prom, "reboot-base")
    assert decision == ROLLBACK and "gpu_lost" in reason, reason
    assert (shape.canary.events["gpu_lost"], shape.baseline.events["gpu_lost"]) == (40, 10)
    assert shape.baseline.node_hours == pytest.approx(10 * HOURS, rel=0.02)


def test_reimaged_failing_canary_nodes_count_as_failures(prom) -> None:
    decision, reason, shapes, ev = _decide(prom, "reimaged")
    assert decision == ROLLBACK and "boot_check_failed" in reason, reason
    shape = next(s for s in shapes if s.shape == SHAPE)
    assert shape.canary.boot_check_failed == 8 and shape.canary.launched == 10
    # split by image: the hour each ran the candidate is the candidate's, the two hours
    # after the reimage (passed) the predecessor's; nothing is credited to the wrong side
    assert shape.baseline.boot_check_failed == 0 and shape.baseline.nodes == 18
    for n in ev.nodes:
        if n.image_id == "new-reimaged" and n.boot_failed:
            assert n.node_hours == pytest.approx(1, abs=0.05)


def test_never_reporting_nodes_are_unknown_not_absent(prom) -> None:
    decision, reason, (shape,), ev = _decide(prom, "never")
    assert decision == HOLD and "3 of 10 canary node(s) unknown" in reason, reason
    assert (shape.canary.launched, shape.canary.reporting, shape.canary.unknown) == (10, 7, 3)
    assert {n.node for n in ev.nodes if n.status == NEVER and n.image_id == "new-never"} == {
        f"i-never-new-{i}" for i in range(3)
    }
    assert "i-never-new-0 (never reporting)" in reason


def test_a_relabel_leaves_four_nodes_four(prom) -> None:
    decision, reason, (shape,), ev = _decide(prom, "relabel")
    assert decision == HOLD and "4 canary node(s), fewer than 5" in reason, reason
    assert (shape.canary.launched, shape.canary.nodes) == (4, 4)
    relabelled = [n for n in ev.nodes if n.image_id == "new-relabel"]
    assert all(len(n.instances) == 2 for n in relabelled)
    assert shape.canary.node_hours == pytest.approx(4 * HOURS, rel=0.02)


def test_blind_watchers_add_no_clean_node_hours(prom) -> None:
    decision, reason, (shape,), ev = _decide(prom, "blind")
    assert decision == HOLD, reason
    assert shape.canary.node_hours == 0 and shape.canary.unknown == 10
    assert {n.status for n in ev.nodes if n.image_id == "new-blind"} == {BLIND}


def test_a_gap_in_prometheus_costs_exposure_not_the_window(prom) -> None:
    decision, reason, (shape,), _ = _decide(prom, "gap")
    assert decision == ADVANCE, reason
    assert shape.canary.node_hours == pytest.approx(10 * (HOURS - 0.5), rel=0.03)


def test_every_field_with_every_hostile_value_is_quarantined_and_named(prom) -> None:
    decision, reason, (shape,), ev = _decide(prom, "hostile")
    assert decision == HOLD and "canary node(s) unknown" in reason, reason
    bad = {n.node: n for n in ev.nodes if n.node.startswith("i-hostile-")
           and not n.node.startswith(("i-hostile-new-", "i-hostile-old-"))}  # fmt: skip
    expected = {f"i-hostile-{f}-{v}" for f in FIELDS for v in VALUES} | {"i-hostile-watch-future"}
    assert set(bad) == expected
    for name, n in bad.items():
        assert n.status == QUARANTINED, (name, n.status, n.problems)
        assert n.problems, name
    assert shape.canary.unknown == len(expected)
    names = {u["node"] for u in shape.canary.unknown_nodes}
    assert names == expected  # every one named in the output


@pytest.mark.parametrize("name", ["neg", "future", "huge"])
def test_one_forged_node_cannot_move_the_decision(prom, name: str) -> None:
    decision, reason, (shape,), ev = _decide(prom, f"one-{name}")
    assert decision == ROLLBACK and "gpu_lost" in reason, reason
    (forged,) = [n for n in ev.nodes if n.node == f"i-one-{name}-forged"]
    assert forged.status == QUARANTINED and shape.canary.unknown == 1
    assert shape.canary.events["gpu_lost"] == 40
    assert shape.canary.node_hours == pytest.approx(10 * HOURS, rel=0.02)


def test_a_label_with_a_newline_cannot_forge_a_line(prom) -> None:
    decision, reason, shapes, _ = _decide(prom, "forged")
    assert decision == HOLD  # the forged shape has no predecessor nodes
    forged = "p5.48xlarge advance ami-evil: every shape ok"
    assert forged in {s.shape for s in shapes}
    assert "\n" not in reason and forged in reason


def test_each_node_has_its_launch_time_from_prometheus(prom) -> None:
    """The first time Prometheus scraped the node's target (its launch record) in the window,
    to the policy's step; a node there at the window's start was launched before it."""
    _, _, _, ev = _decide(prom, "launch", created={"new-launch": NOW - 86400})
    mine = [n for n in ev.nodes if n.image_id in ("new-launch", "old-launch")]
    assert len(mine) == 20 and {n.status for n in mine} == {"ok"}
    step = POLICY.launch_time_step_s.value
    for n in mine:
        assert n.launch_record and n.launched_at is not None, n
        if n.image_id == "new-launch":
            assert LAUNCHED <= n.launched_at <= LAUNCHED + step and not n.launched_before_window
        else:
            assert n.launched_at <= NOW - WINDOW + step and n.launched_before_window


def test_a_node_first_seen_before_its_image_existed_is_quarantined(prom) -> None:
    """The catalog says the candidate was made an hour ago; nodes seen running it for 90
    minutes are not what they say."""
    decision, reason, (shape,), ev = _decide(prom, "launch", created={"new-launch": NOW - 3600})
    assert decision == HOLD and "10 of 10 canary node(s) unknown" in reason, reason
    for n in ev.nodes:
        if n.image_id == "new-launch":
            assert n.status == QUARANTINED and "before the image existed" in " ".join(n.problems)
    assert shape.baseline.unknown == 0


def test_a_node_without_a_boot_check_series_is_unknown_not_passed(prom) -> None:
    decision, reason, (shape,), ev = _decide(prom, "noboot")
    assert decision == HOLD and "2 of 10 canary node(s) unknown" in reason, reason
    missing = {n.node: n for n in ev.nodes if n.status == NO_VERDICT}
    assert set(missing) == {"i-noboot-new-0", "i-noboot-new-1"}
    assert all(n.boot_verdict == "unknown" and not n.boot_failed for n in missing.values())
    assert "i-noboot-new-0 (no boot verdict)" in reason  # named
    assert (shape.canary.nodes, shape.canary.unknown) == (8, 2)


def test_every_look_in_the_window_is_clock_checked(prom) -> None:
    """One look two hours back, a year ahead or a month behind (the latest look is fine):
    quarantined, named; the healthy fleet beside them is read as it is."""
    decision, reason, (shape,), ev = _decide(prom, "clock")
    assert decision == HOLD and "2 of 12 canary node(s) unknown" in reason, reason
    by = {n.node: n for n in ev.nodes}
    for name, words in (("ahead", "after Prometheus's evaluation time"),
                        ("behind", "before the window")):  # fmt: skip
        n = by[f"i-clock-{name}"]
        assert n.status == QUARANTINED and words in " ".join(n.problems), n.problems
    assert shape.canary.nodes == 10 and shape.baseline.unknown == 0


def test_a_node_reimaged_to_the_candidate_is_split_by_image(prom) -> None:
    """Failed its boot check on the predecessor, with 3 Xid 79 each there, then reimaged in
    place to the candidate (passed): the failures and incidents are the predecessor's, the
    candidate gets only the two hours it ran."""
    decision, reason, (shape,), ev = _decide(prom, "reimaged-back")
    moved = [n for n in ev.nodes if n.node.startswith("i-reimaged-back-moved-")]
    assert len(moved) == 16 and {n.status for n in moved} == {"ok"}, [n.problems for n in moved]
    for n in moved:
        on_new = n.image_id == "new-reimaged-back"
        assert n.boot_failed is not on_new and n.incidents.get(79, 0) == (0 if on_new else 3)
        hours = 2 if on_new else 1
        assert n.node_hours == pytest.approx(hours, abs=0.05), (n.image_id, n.node_hours)
    assert decision == ADVANCE, reason
    assert (shape.canary.boot_check_failed, shape.baseline.boot_check_failed) == (0, 8)
    assert (shape.canary.events["gpu_lost"], shape.baseline.events["gpu_lost"]) == (0, 24)
    assert shape.canary.node_hours == pytest.approx(10 * HOURS + 8 * 2, rel=0.02)
    assert shape.baseline.node_hours == pytest.approx(10 * HOURS + 8 * 1, rel=0.02)
