"""``imagectl rollout`` end to end: a real Prometheus (Debian's package) on 127.0.0.1
serving six hours of an emulated fleet's series, backfilled with promtool
(``tests/fleet/history.py``), whose info series carry the labels the real validator
writes over a replayed 8-GPU snapshot (``boot_file``); the catalog and the local cloud
are real (``world``): a predecessor promoted to latest, a candidate on the canary
pointer. The cases:

- a healthy canary advances (the candidate is promoted: latest moves in every region);
- a canary whose nodes have Xid 79 at several times the predecessor's rate is rolled
  back (canary pointer removed) and blocked, with the evidence;
- a canary with too few nodes holds;
- Prometheus stopped holds (unreachable: unknown, never zero);
- a canary whose watchers are off holds, naming the setting that enables them;
- credentials in ``IMAGECTL_PROMETHEUS_URL`` reach Prometheus and are never printed or
  stored (rollout's text and ``--json``, status's text and ``--json``, the catalog).

Every decision is in the catalog (``rollout_decisions``) with its queries and numbers,
and in ``--json``."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from imagectl.catalog.models import RolloutDecision
from imagectl.promotion import promote
from imagectl.rollout.canary import set_canary
from tests.fleet.history import Node, openmetrics, serve
from tests.fleet.nodes import boot_file, node_snapshot

HOURS = 6.0
SHAPE = "p5.48xlarge"


def _info_labels(image_id: str, instance_id: str) -> dict[str, str]:
    """The info series' labels as the real validator writes them for this node."""
    snap = node_snapshot(image_id=image_id, booted_at=time.time() - 86400)
    snap["host"]["cloud_image"]["instance_id"] = instance_id
    text = boot_file(snap, stack="local")
    line = next(x for x in text.splitlines() if x.startswith("imagectl_node_info{"))
    return dict(re.findall(r'(\w+)="([^"]*)"', line))


@pytest.fixture
def promserver(tmp_path: Path) -> Iterator[Any]:
    started: list[Any] = []

    def start(nodes: list[Node]) -> Any:
        now = float(int(time.time()))
        server = serve(tmp_path / f"prom{len(started)}",
                       openmetrics(nodes, now - HOURS * 3600 - 600, now))  # fmt: skip
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


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
    # built two days ago: the fleet's six hours of history ran images that existed (a node
    # first seen running an image before the catalog's record of it is quarantined)
    from sqlalchemy import update

    from imagectl.catalog.models import Image

    with world.catalog.transaction() as s:
        s.execute(update(Image).values(created_at=dt.datetime.now(dt.timezone.utc)
                                       - dt.timedelta(days=2)))  # fmt: skip
    return old, new


def _side(image: Any, n: int, per_node: int = 0, **kw: Any) -> list[Node]:
    now = time.time()
    out = []
    for i in range(n):
        ident = f"i-{image.id}-{i:04d}"
        labels = _info_labels(image.cloud_image_id, ident)
        assert labels["instance_id"] == ident and labels["shape"] == SHAPE
        xids = [(now - HOURS * 3600 + (k + 1) * 3600 + i, 79) for k in range(per_node)]
        out.append(Node(instance_id=ident, image_id=labels["image_id"], shape=labels["shape"],
                        stack=labels["stack"], xids=xids, **kw))  # fmt: skip
    return out


def _fleet(old: Any, new: Any, *, canary_nodes: int, canary_xids: int, old_xids: list[int],
           **kw: Any) -> list[Node]:  # fmt: skip
    nodes = _side(new, canary_nodes, canary_xids, **kw)
    for i, x in enumerate(old_xids):
        (node,) = _side(old, 1, x)
        node.instance_id = f"i-{old.id}-{i:04d}"
        nodes.append(node)
    return nodes


def _rollout(cli, server: Any, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Any:
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", server.url)
    return cli("rollout", "--stack", "local", "--cloud", "local", "--window", "6h", "--json",
               *extra)  # fmt: skip


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
    server = promserver(_fleet(old, new, canary_nodes=10, canary_xids=0, old_xids=[0] * 9 + [1]))
    r = _rollout(cli, server, monkeypatch)
    assert r.code == 0, r.out + r.err
    doc = r.json()
    assert doc["decision"] == "advance" and doc["candidate"] == new.cloud_image_id
    assert doc["look"] == 1 and doc["tested"] and doc["alpha_spent"] == pytest.approx(0.005)
    (shape,) = doc["shapes"]
    assert shape["shape"] == "p5.48xlarge"
    for side in ("canary", "baseline"):
        got = {k: shape[side][k] for k in ("launched", "reporting", "unknown", "nodes")}
        assert got == {"launched": 10, "reporting": 10, "unknown": 0, "nodes": 10}
    assert shape["canary"]["node_hours"] == pytest.approx(10 * HOURS, rel=0.01)
    assert shape["baseline"]["events"]["gpu_lost"] == 1
    # every node in --json, each with its launch time (Prometheus's first scrape of its
    # target in the window: these ran from before the window) and its boot verdict
    assert len(doc["nodes"]) == 20 and {n["status"] for n in doc["nodes"]} == {"ok"}
    start = doc["at"] - doc["window_s"]
    for n in doc["nodes"]:
        assert n["launch_record"] and n["launched_before_window"], n
        assert start - 600 <= n["launched_at"] <= start + 300 and n["boot_verdict"] == "passed"
    (gpu_lost,) = [c for c in shape["comparisons"] if c["name"] == "gpu_lost"]
    assert gpu_lost["test"].startswith("conditional binomial") and not gpu_lost["failed"]
    assert doc["applied"] == "promote: promoted"
    assert _latest(world) == dict.fromkeys(("local-a", "local-b", "local-c"), new.cloud_image_id)
    (row,) = _decisions(world)
    assert (row.decision, row.candidate_id, row.baseline_id) == ("advance", new.id, old.id)
    assert row.evidence["queries"]["info"].startswith("max by (instance, instance_id, image_id")
    assert row.evidence["tested"] and row.evidence["look"] == 1
    assert row.evidence["shapes"][0]["comparisons"]
    # a second run: the canary already is latest, nothing to decide
    again = _rollout(cli, server, monkeypatch)
    assert again.code == 3 and "already is latest" in again.json()["reason"]


def test_xid_79_at_several_times_the_rate_rolls_back_and_blocks(
    world, canary, cli, promserver, monkeypatch
) -> None:
    old, new = canary
    before = _latest(world)
    server = promserver(_fleet(old, new, canary_nodes=10, canary_xids=3, old_xids=[0] * 9 + [1]))
    r = _rollout(cli, server, monkeypatch)
    assert r.code == 1, r.out + r.err
    doc = r.json()
    assert doc["decision"] == "rollback" and "gpu_lost" in doc["reason"]
    (shape,) = doc["shapes"]
    assert (
        shape["canary"]["events"]["gpu_lost"] == 30 and shape["baseline"]["events"]["gpu_lost"] == 1
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
    server = promserver(_fleet(old, new, canary_nodes=2, canary_xids=0, old_xids=[0] * 10))
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
    server = promserver(_fleet(old, new, canary_nodes=10, canary_xids=0, old_xids=[0] * 10))
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


def test_a_canary_without_watchers_holds_and_names_the_setting(
    world, canary, cli, promserver, monkeypatch
) -> None:
    """The shipped stacks leave the watcher off: a canary with no watcher looking holds,
    and says what turns it on."""
    old, new = canary
    nodes = _fleet(old, new, canary_nodes=10, canary_xids=0, old_xids=[0] * 10)
    for n in nodes[:10]:
        n.watcher = False
    server = promserver(nodes)
    r = _rollout(cli, server, monkeypatch)
    assert r.code == 3, r.out + r.err
    reason = r.json()["reason"]
    assert "validation.watcher: true" in reason and "validator_watch_enabled" in reason


class _AuthProxy:
    """Basic auth in front of the Prometheus: forwards /api/v1/query with the right
    credentials, 401 without."""

    def __init__(self, upstream: str, user: str, password: str) -> None:
        want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization") != want:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with urllib.request.urlopen(upstream + self.path, timeout=30) as up:
                    body = up.read()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"


def test_url_credentials_are_never_printed_or_stored(
    world, canary, cli, promserver, monkeypatch
) -> None:
    old, new = canary
    server = promserver(_fleet(old, new, canary_nodes=2, canary_xids=0, old_xids=[0] * 10))
    secret = "pw-Zq81xx"
    proxy = _AuthProxy(server.url, "ops", secret)
    try:
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", f"http://ops:{secret}@{proxy.host}")
        r = cli("rollout", "--stack", "local", "--cloud", "local", "--window", "6h", "--json")
        text = cli("rollout", "--stack", "local", "--cloud", "local", "--window", "6h")
    finally:
        proxy.httpd.shutdown()
        proxy.httpd.server_close()
    assert r.code == 3 and "fewer than 5" in r.json()["reason"], r.out + r.err  # it connected
    assert r.json()["prometheus"] == f"http://{proxy.host}"
    shown = cli("status", "--stack", "local")
    shown_json = cli("status", "--stack", "local", "--json")
    for out in (r.out + r.err, text.out + text.err, shown.out, shown_json.out):
        assert secret not in out
    for row in _decisions(world):
        assert secret not in json.dumps(row.evidence) + row.reason + row.applied
