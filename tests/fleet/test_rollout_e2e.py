"""``imagectl rollout`` end to end (issue 47, "Done when"): a real Prometheus (Debian's
package) on 127.0.0.1 scrapes an emulated fleet every second; each node's metrics come
from the real validator (boot check) and watcher over a replayed 8-GPU snapshot; the
catalog and the local cloud are real (``world``): a predecessor promoted to latest, a
candidate on the canary pointer. Four cases:

- a healthy canary advances (the candidate is promoted: latest moves in every region);
- a canary whose nodes replay Xid 79 at several times the predecessor's rate is rolled
  back (canary pointer removed) and blocked, with the evidence;
- a canary with too few nodes holds;
- Prometheus stopped mid-window holds: stopped (unreachable), and stopped then started
  again on the same storage (it started within the window: a gap).

Every decision is in the catalog (``rollout_decisions``) with its queries and numbers,
and in ``--json``. Each case takes a few seconds of scraping."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagectl.catalog.models import RolloutDecision
from imagectl.promotion import promote
from imagectl.rollout.canary import set_canary
from tests.fleet.harness import Exporters, PrometheusServer
from tests.fleet.nodes import boot_file, node_snapshot, watch_file, with_xids
from tests.support import require_tool

HOURS = 48.0  # every node booted two days ago: 48 node-hours each
_cache: dict[tuple[str, int], str] = {}


def node_text(image_id: str, xids: int, now: float) -> str:
    """The node's textfile metrics: the boot check's file and the watcher's."""
    key = (image_id, xids)
    if key not in _cache:
        booted = now - HOURS * 3600
        snap = node_snapshot(image_id=image_id, booted_at=booted)
        times = [booted + 3600 * (i + 1) for i in range(xids)]
        _cache[key] = boot_file(snap, stack="local") + watch_file(with_xids(snap, times), now)
    return _cache[key]


@pytest.fixture
def promserver(tmp_path: Path) -> Iterator[Any]:
    binary = require_tool("prometheus")
    started: list[tuple[Exporters, PrometheusServer]] = []

    def start(texts: list[str]) -> PrometheusServer:
        exporters = Exporters(texts)
        server = PrometheusServer(binary, tmp_path / f"prom{len(started)}", exporters.targets)
        started.append((exporters, server))
        server.wait_scraped(len(texts))
        return server

    yield start
    for exporters, server in started:
        server.stop()
        exporters.close()


@pytest.fixture
def canary(world, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """A predecessor promoted to latest, and a validated candidate on the canary pointer."""
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", world.db_url)
    monkeypatch.setenv("IMAGECTL_LOCAL_REGISTRY", str(world.registry))
    monkeypatch.setenv("IMAGECTL_ROOT", str(Path(__file__).resolve().parents[2]))
    old = world.validated()
    assert promote(world.catalog, world.provider(), world.stack, old.id).exit_code == 0
    new = world.validated()
    set_canary(world.catalog, world.provider(), world.stack, new.id)
    assert world.provider().get_canary_pointer("local", "build") == new.cloud_image_id
    return old, new


def _fleet(
    old: Any, new: Any, *, canary_nodes: int, canary_xids: int, old_xids: list[int]
) -> list[str]:
    now = time.time()
    texts = [node_text(new.cloud_image_id, canary_xids, now) for _ in range(canary_nodes)]
    texts += [node_text(old.cloud_image_id, x, now) for x in old_xids]
    return texts


def _rollout(cli, server: Any, monkeypatch: pytest.MonkeyPatch, window: str = "") -> Any:
    """``imagectl rollout --json``; the window is the server's life so far but a second
    (a server that started within the window holds: its window has a gap)."""
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", server.url)
    window = window or f"{max(2, int(time.time() - server.started) - 1)}s"
    return cli("rollout", "--stack", "local", "--cloud", "local", "--window", window, "--json")


def _decisions(world) -> list[RolloutDecision]:
    from sqlalchemy import select

    with world.catalog.transaction() as s:
        rows = list(s.scalars(select(RolloutDecision).order_by(RolloutDecision.id)))
        s.expunge_all()
        return rows


def _latest(world) -> dict[str, str | None]:
    return {r: world.provider().get_pointer("local", r) for r in ("local-a", "local-b", "local-c")}


def test_a_healthy_canary_advances(world, canary, cli, promserver, monkeypatch) -> None:
    old, new = canary
    server = promserver(_fleet(old, new, canary_nodes=6, canary_xids=0, old_xids=[0] * 5 + [1]))
    r = _rollout(cli, server, monkeypatch)
    assert r.code == 0, r.out + r.err
    doc = r.json()
    assert doc["decision"] == "advance" and doc["candidate"] == new.cloud_image_id
    (shape,) = doc["shapes"]
    assert shape["shape"] == "p5.48xlarge"
    assert (shape["canary"]["nodes"], shape["baseline"]["nodes"]) == (6, 6)
    assert shape["canary"]["node_hours"] == pytest.approx(6 * HOURS, rel=0.01)
    assert shape["baseline"]["events"]["gpu_lost"] == 1
    assert doc["applied"] == "promote: promoted"
    assert _latest(world) == dict.fromkeys(("local-a", "local-b", "local-c"), new.cloud_image_id)
    (row,) = _decisions(world)
    assert (row.decision, row.candidate_id, row.baseline_id) == ("advance", new.id, old.id)
    assert row.evidence["queries"]["info"].startswith("max by (instance, image_id, shape)")
    assert row.evidence["shapes"][0]["comparisons"]
    # a second run: the canary already is latest, nothing to decide
    again = _rollout(cli, server, monkeypatch)
    assert again.code == 3 and "already is latest" in again.json()["reason"]


def test_xid_79_at_several_times_the_rate_rolls_back_and_blocks(
    world, canary, cli, promserver, monkeypatch
) -> None:
    old, new = canary
    before = _latest(world)
    server = promserver(_fleet(old, new, canary_nodes=6, canary_xids=3, old_xids=[0] * 5 + [1]))
    r = _rollout(cli, server, monkeypatch)
    assert r.code == 1, r.out + r.err
    doc = r.json()
    assert doc["decision"] == "rollback" and "gpu_lost" in doc["reason"]
    (shape,) = doc["shapes"]
    assert (
        shape["canary"]["events"]["gpu_lost"] == 18 and shape["baseline"]["events"]["gpu_lost"] == 1
    )
    (gpu_lost,) = [c for c in shape["comparisons"] if c["name"] == "gpu_lost"]
    assert gpu_lost["failed"] and gpu_lost["effect"] >= 2.0  # several times the rate
    assert world.provider().get_canary_pointer("local", "build") is None  # back: none before
    assert _latest(world) == before  # latest untouched
    img = world.image(new.id)
    assert img.state == "blocked" and "gpu_lost" in (img.blocked_reason or "")
    (row,) = _decisions(world)
    assert row.decision == "rollback" and "canary pointer back" in row.applied
    # blocked: a later promote refuses it
    from imagectl.promotion import ImageBlocked

    with pytest.raises(ImageBlocked):
        promote(world.catalog, world.provider(), world.stack, new.id)
    # status shows the decision, and no canary any more
    (entry,) = cli("status", "--stack", "local", "--json").json()["stacks"]
    assert entry["canary"] == []
    assert [(d["decision"], d["candidate"]) for d in entry["rollouts"]] == [
        ("rollback", new.cloud_image_id)
    ]


def test_too_few_canary_nodes_hold(world, canary, cli, promserver, monkeypatch) -> None:
    old, new = canary
    before = _latest(world)
    server = promserver(_fleet(old, new, canary_nodes=2, canary_xids=0, old_xids=[0] * 6))
    r = _rollout(cli, server, monkeypatch)
    assert r.code == 3, r.out + r.err
    doc = r.json()
    assert doc["decision"] == "hold" and "2 canary node(s), fewer than 5" in doc["reason"]
    assert _latest(world) == before
    assert world.provider().get_canary_pointer("local", "build") == new.cloud_image_id
    assert world.image(new.id).state == "validated"
    assert [d.decision for d in _decisions(world)] == ["hold"]
    shown = cli("status", "--stack", "local")
    assert f"canary in build: {new.cloud_image_id} (validated" in shown.out
    assert "last rollout (1," in shown.out and "hold" in shown.out
    assert "2 canary node(s), fewer than 5" in shown.out


def test_prometheus_stopped_mid_window_holds(world, canary, cli, promserver, monkeypatch) -> None:
    old, new = canary
    before = _latest(world)
    server = promserver(_fleet(old, new, canary_nodes=6, canary_xids=0, old_xids=[0] * 6))
    server.stop()
    r = _rollout(cli, server, monkeypatch)
    assert r.code == 3, r.out + r.err
    doc = r.json()
    assert doc["decision"] == "hold" and "Prometheus unavailable" in doc["reason"]
    assert doc["shapes"] == []
    assert _latest(world) == before
    assert world.provider().get_canary_pointer("local", "build") == new.cloud_image_id
    (row,) = _decisions(world)
    assert row.decision == "hold" and row.applied == "nothing: hold"


def test_prometheus_restarted_within_the_window_holds(
    world, canary, cli, promserver, monkeypatch, tmp_path: Path
) -> None:
    """Down part of the window, then back on the same storage: the window has a gap."""
    old, new = canary
    server = promserver(_fleet(old, new, canary_nodes=6, canary_xids=0, old_xids=[0] * 6))
    server.stop()
    again = PrometheusServer(server.binary, server.folder, server.targets)
    try:
        again.wait_scraped(12, scrapes=3)
        r = _rollout(cli, again, monkeypatch, window="1m")
    finally:
        again.stop()
    assert r.code == 3, r.out + r.err
    doc = r.json()
    assert doc["decision"] == "hold" and "within the 60 s window" in doc["reason"]
    assert world.provider().get_canary_pointer("local", "build") == new.cloud_image_id
    # held before the fleet was read: no per-shape numbers
    assert doc["shapes"] == []
