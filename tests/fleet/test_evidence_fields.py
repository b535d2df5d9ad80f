"""Every field of the evidence model against every class of hostile value: the fields of
``NodeEvidence`` are enumerated (a new field must be named in
``evidence.FIELD_SOURCES`` with the answers it is read from, or this test fails), and each
answer any field is read from is given, for one node at a time, each class of bad value:
NaN, +Inf, -Inf, negative, huge, a value of the wrong type, the series missing, and a time
in the future (the sample's own time, or the value where the value is a time).

A local HTTP server speaks the documented query API (``GET /api/v1/query``: a vector or a
matrix, values as strings; Prometheus HTTP API, "Expression query result formats") and
answers each of the rollout's queries; a real Prometheus stores only floats, and gives the
NaN/Inf/negative/huge cases in tests/fleet/test_evidence_prometheus.py. Each hostile node
must end unknown with its reason (quarantined, or, for a missing series, the status that
says what is missing), the healthy node beside it read as it is. Where the series' absence
is the healthy answer (an answer that lists only exceptions), ``ABSENT_IS_HEALTHY`` says why.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from imagectl.rollout import evidence
from imagectl.rollout.evidence import (
    BLIND,
    FIELD_SOURCES,
    MATRIX,
    NEVER,
    NO_VERDICT,
    QUARANTINED,
    QUERIES,
    NodeEvidence,
    queries,
    read,
)
from imagectl.rollout.policy import load_policy
from imagectl.rollout.prom import Prometheus

POLICY = load_policy()
AT, WINDOW = 1_800_000_000.0, 3600
SHAPE, IMAGE = "p5.48xlarge", "ami-new"
FUTURE = AT + 10 * 365 * 86400
CLASSES = {
    "nan": "NaN", "inf": "+Inf", "-inf": "-Inf", "negative": "-1000", "huge": "1e9",
    "wrong-type": {"a": 1}, "missing": None, "future": None,
}  # fmt: skip
# the answers whose absence is the healthy answer, and why
ABSENT_IS_HEALTHY = {
    "lag": "lists only the watchers whose last look is off Prometheus's sample time",
    "clock": "lists only the watchers with a look outside the window's times",
    "worst": "lists only nodes whose worst action is not 0; the boot file that writes it "
    "also writes imagectl_validation_passed, whose absence is a missing boot verdict",
    "problems": "lists only nodes with a GPU problem; the watcher file that writes it also "
    "writes the look times, whose absence makes the node blind",
    "xid_base": "a counter born in the window counts from zero",
    "xids": "the watcher writes a code's counter once it has seen the code",
}
# what a missing row-per-node answer makes of the node
MISSING = {"info": NEVER, "looks": BLIND, "read_ok": BLIND, "passed": NO_VERDICT}


def _answers() -> list[str]:
    return sorted({a for sources in FIELD_SOURCES.values() for a in sources})


def _labels(node: str) -> dict[str, str]:
    return {"instance": f"{node}:9100"}


def _rows(node: str) -> dict[str, list[tuple[dict[str, str], Any, float]]]:
    """A healthy node's rows in each answer: (labels, value, sample time)."""
    inst = _labels(node)
    return {
        "info": [({**inst, "instance_id": f"i-{node}", "image_id": IMAGE, "shape": SHAPE}, "1",
                  AT)],
        "launched": [({**inst, "imagectl_instance_id": f"i-{node}", "imagectl_image_id": IMAGE,
                       "imagectl_shape": SHAPE}, str(AT - 1800), AT)],
        "looks": [(inst, "61", AT)],
        "read_ok": [(inst, "1", AT)],
        "passed": [(inst, "1", AT)],
        "lag": [], "clock": [], "worst": [], "problems": [], "xid_base": [],
        "xids": [({**inst, "xid": "79"}, "1", AT - 600), ({**inst, "xid": "79"}, "2", AT - 60)],
    }  # fmt: skip


def _hostile(node: str, answer: str, cls: str) -> dict[str, list[Any]]:
    rows = _rows(node)
    if cls == "missing":
        rows[answer] = []
        return rows
    template = rows[answer] or [({**_labels(node), "xid": "79"} if answer == "xid_base"
                                 else _labels(node), "0", AT)]  # fmt: skip
    labels, value, t = template[-1]
    if cls == "future":
        # a time as the value where the value is one, else the sample's own time
        if answer in ("launched", "clock"):
            value = repr(FUTURE)
        else:
            t = FUTURE
    else:
        value = CLASSES[cls]
    rows[answer] = [*template[:-1], (labels, value, t)]
    return rows


def _document(key: str, rows: list[tuple[dict[str, str], Any, float]]) -> dict[str, Any]:
    if key in MATRIX:
        series: dict[str, dict[str, Any]] = {}
        for labels, value, t in rows:
            one = series.setdefault(json.dumps(labels, sort_keys=True),
                                    {"metric": labels, "values": []})  # fmt: skip
            one["values"].append([t, value])
        return {"status": "success",
                "data": {"resultType": "matrix", "result": list(series.values())}}  # fmt: skip
    result = [{"metric": m, "value": [t, v]} for m, v, t in rows]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


CASES = [(a, c) for a in _answers() for c in CLASSES]


@pytest.fixture(scope="module")
def answered() -> Iterator[dict[str, NodeEvidence | list[NodeEvidence]]]:
    nodes: dict[str, dict[str, list[Any]]] = {"good": _rows("good")}
    for answer, cls in CASES:
        nodes[f"{answer}-{cls}"] = _hostile(f"{answer}-{cls}", answer, cls)
    texts = queries("s", WINDOW, AT, POLICY)
    by_query = {
        texts[k]: json.dumps(_document(k, [r for rows in nodes.values() for r in rows[k]]))
        for k in texts
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["query"][0]
            body = by_query[query].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        ev = read(Prometheus(f"http://127.0.0.1:{httpd.server_address[1]}", {}), "s", WINDOW,
                  AT, POLICY)  # fmt: skip
    finally:
        httpd.shutdown()
        httpd.server_close()
    out: dict[str, Any] = {}
    for n in ev.nodes:
        out.setdefault(n.node.removeprefix("i-"), []).append(n)
    yield out


def test_every_field_of_the_evidence_model_names_its_answers() -> None:
    fields = {f.name for f in dataclasses.fields(NodeEvidence)}
    assert set(FIELD_SOURCES) == fields, "name each field's answers in evidence.FIELD_SOURCES"
    answers = set(QUERIES) | set(MATRIX)
    for name, sources in FIELD_SOURCES.items():
        assert set(sources) <= answers, (name, sources)
    # every answer the rollout asks for feeds a field (none is read and then ignored)
    assert answers == set(_answers())
    # and this test gives every one of them a healthy row (a new answer needs one)
    assert set(_rows("x")) == answers
    assert set(ABSENT_IS_HEALTHY) | set(MISSING) | {"launched"} == answers


def test_the_healthy_node_is_read_as_it_is(answered) -> None:
    (good,) = answered["good"]
    assert good.status == "ok", good.problems
    assert good.exposure_s == WINDOW and good.incidents == {79: 2}  # born in the window
    assert good.launched_at == AT - 1800 and good.boot_verdict == "passed"


@pytest.mark.parametrize(("answer", "cls"), CASES, ids=[f"{a}-{c}" for a, c in CASES])
def test_each_answer_with_each_hostile_value(answered, answer: str, cls: str) -> None:
    records = answered[f"{answer}-{cls}"]
    if cls == "missing" and answer in ABSENT_IS_HEALTHY:
        assert [n.status for n in records] == ["ok"], [n.problems for n in records]
        return
    if cls == "missing" and answer == "launched":
        # a node that reports without a launch record still counts; it has no launch time
        ((n),) = records
        assert (n.status, n.launch_record, n.launched_at) == ("ok", False, None)
        return
    expected = MISSING.get(answer, QUARANTINED) if cls == "missing" else QUARANTINED
    if cls == "missing" and answer == "info":
        assert [n.status for n in records] == [NEVER]
        return
    for n in records:
        assert n.status == expected, (n.status, n.problems)
        assert n.problems and all("\n" not in p for p in n.problems)
        assert not n.known


def test_hostile_classes_cover_the_issue() -> None:
    """NaN, +-Inf, negative, huge, wrong type, missing and future time (the issue's list)."""
    assert set(CLASSES) == {"nan", "inf", "-inf", "negative", "huge", "wrong-type", "missing",
                            "future"}  # fmt: skip
    assert evidence.NO_VERDICT in MISSING.values()
