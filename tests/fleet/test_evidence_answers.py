"""The evidence model over hostile answers a real Prometheus cannot give (it stores only
floats) but a server on the path can: a local HTTP server speaking the query API answers
each of the rollout's queries (``evidence.QUERIES``) with a vector in the documented
format, in which one node's sample has a value of the wrong type (a word, null, an object,
a list, a bare number instead of a string). Each such node is quarantined and named, the
others are read as they are; a matrix sample of the wrong type quarantines its node too."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from imagectl.rollout.evidence import QUARANTINED, queries, read
from imagectl.rollout.policy import load_policy
from imagectl.rollout.prom import Prometheus

POLICY = load_policy()
AT, WINDOW = 1_800_000_000.0, 3600
KEYS = ("passed", "worst", "problems", "looks", "read_ok", "lag", "clock", "xid_base", "launched")
BAD = {"word": "one", "null": None, "object": {"a": 1}, "list": [1], "number": 1}


def _vector(rows: list[tuple[dict[str, str], Any]]) -> dict[str, Any]:
    result = [{"metric": m, "value": [AT, v]} for m, v in rows]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def _answers() -> dict[str, dict[str, Any]]:
    nodes = ["good"] + [f"{k}-{b}" for k in KEYS for b in BAD] + ["xids-word"]
    inst = {n: {"instance": f"{n}:9100"} for n in nodes}
    out: dict[str, list[tuple[dict[str, str], Any]]] = {k: [] for k in (*KEYS, "info")}
    launch = {n: {**inst[n], "imagectl_instance_id": f"i-{n}", "imagectl_image_id": "new",
                  "imagectl_shape": "p5.48xlarge"} for n in nodes}  # fmt: skip
    for n in nodes:
        labels = {**inst[n], "instance_id": f"i-{n}", "image_id": "new", "shape": "p5.48xlarge"}
        out["info"].append((labels, "1"))
        out["launched"].append((launch[n], str(AT - WINDOW)))
        out["looks"].append((inst[n], "61"))
        out["passed"].append((inst[n], "1"))
        out["read_ok"].append((inst[n], "1"))
    for k in KEYS:
        for b, value in BAD.items():
            n = f"{k}-{b}"
            if k in ("looks", "passed", "read_ok", "launched"):  # a row per node: replaced
                out[k] = [r for r in out[k] if r[0].get("instance") != inst[n]["instance"]]
            labels = {**inst[n], "xid": "79"} if k == "xid_base" else inst[n]
            labels = launch[n] if k == "launched" else labels
            out[k].append((labels, value))
    docs = {k: _vector(v) for k, v in out.items()}
    bad_series = {"metric": {**inst["xids-word"], "xid": "79"}, "values": [[AT - 60, "one"]]}
    docs["xids"] = {"status": "success", "data": {"resultType": "matrix", "result": [bad_series]}}
    return docs


@pytest.fixture
def server() -> Iterator[str]:
    by_query = {q: _answers()[k] for k, q in queries("s", WINDOW, AT, POLICY).items()}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["query"][0]
            body = json.dumps(by_query[query]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_value_of_the_wrong_type_quarantines_its_node(server: str) -> None:
    ev = read(Prometheus(server, {}), "s", WINDOW, AT, POLICY)
    by = {n.node: n for n in ev.nodes}
    assert by["i-good"].status == "ok" and by["i-good"].exposure_s == WINDOW
    for k in KEYS:
        for b in BAD:
            n = by[f"i-{k}-{b}"]
            assert n.status == QUARANTINED and n.problems, (k, b, n.status, n.problems)
    assert by["i-xids-word"].status == QUARANTINED
    assert "not a number" in " ".join(by["i-xids-word"].problems)


def test_a_node_without_an_instance_id_matches_its_launch_record_by_address() -> None:
    """A validator from before ``instance_id`` (or a cloud without it): the node is known by
    its address, and its launch record (the same target's ``up``) is matched by it, so it
    is not counted twice (once reporting, once never reporting)."""
    from imagectl.rollout.evidence import build
    from imagectl.rollout.prom import Sample

    info = [Sample({"instance": "a:9100", "image_id": "new", "shape": "s"}, 1.0, AT)]
    launched = [
        Sample({"instance": "a:9100", "imagectl_instance_id": "i-a", "imagectl_image_id": "new",
                "imagectl_shape": "s"}, AT - 600, AT),
        Sample({"instance": "b:9100", "imagectl_instance_id": "i-b", "imagectl_image_id": "new",
                "imagectl_shape": "s"}, AT - 600, AT),
    ]  # fmt: skip
    vectors = {k: [] for k in ("worst", "problems", "lag", "clock", "xid_base")}
    vectors |= {"info": info, "launched": launched,
                "looks": [Sample({"instance": "a:9100"}, 61.0, AT)],
                "passed": [Sample({"instance": "a:9100"}, 1.0, AT)],
                "read_ok": [Sample({"instance": "a:9100"}, 1.0, AT)]}  # fmt: skip
    ev = build(vectors, [], at=AT, window_s=WINDOW, policy=POLICY)
    got = sorted((n.node, n.status, n.launch_record) for n in ev.nodes)
    assert got == [("i-b", "never reporting", True), ("instance:a:9100", "ok", True)]
