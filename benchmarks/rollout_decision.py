"""Benchmark: the rollout decision over 10,000 nodes' series (the goal: under 2 s).

The fleet: N nodes of one stack on two shapes, half on the candidate and half on its
predecessor, each with the series a healthy 8-GPU node exports (boot check and watcher),
some with Xid incidents, failed boot checks and GPU problems. The benchmark builds the
answers Prometheus's HTTP API gives to the rollout's queries
(``imagectl.rollout.evidence.QUERIES``) as the JSON bodies Prometheus sends, then times
what ``imagectl rollout`` does with them: parse every body (``prom.parse_vector``), make
the evidence (``evidence.build``) and decide per shape (``decide.decide``).

With ``--prometheus``, the same fleet is written as OpenMetrics, backfilled into a TSDB
with ``promtool tsdb create-blocks-from openmetrics`` (Debian's prometheus package), and
a real ``prometheus`` on 127.0.0.1 answers the queries: the time then includes
Prometheus evaluating them over 10,000 nodes' series and the HTTP transfers.

Prints the wall time per decision (median of --repeat), nodes per second and the
decision. Usage: python benchmarks/rollout_decision.py [--nodes N] [--repeat R]
[--prometheus] [--short] (``--short``: 1,000 nodes, in memory, one run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from imagectl.rollout.decide import decide
from imagectl.rollout.evidence import MATRIX, build, read
from imagectl.rollout.policy import load_policy
from imagectl.rollout.prom import Prometheus, parse_matrix, parse_vector

STACK = "h100-training"
SHAPES = ("p5.48xlarge", "a3-megagpu-8g")
NEW, OLD = "ami-0candidate", "ami-0predecessor"
WINDOW = 3600
STEP = 60  # one look (and one scrape) a minute
GOAL_S = 2.0  # the decision over 10,000 nodes


def fleet(n: int, now: float) -> list[dict[str, Any]]:
    rng = random.Random(47)
    out = []
    for i in range(n):
        out.append(
            {
                "instance": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:9100",
                "instance_id": f"i-{i:017x}",
                "image_id": NEW if i % 2 else OLD,
                "shape": SHAPES[i // 2 % len(SHAPES)],
                "passed": 0 if rng.random() < 0.01 else 1,
                "worst": 4 if rng.random() < 0.01 else 0,
                "boot": now - rng.uniform(3600, 30 * 86400),
                "xids": {79: 1} if rng.random() < 0.02 else {},
                "problems": 1 if rng.random() < 0.005 else 0,
            }
        )
    return out


def bodies(nodes: list[dict[str, Any]], now: float) -> dict[str, bytes]:
    """The JSON Prometheus's /api/v1/query returns for each of the rollout's queries
    (``imagectl.rollout.evidence.QUERIES``) over this fleet, every node watched the whole
    window."""

    def vector(rows: list[tuple[dict[str, str], float]]) -> bytes:
        result = [{"metric": m, "value": [now, repr(float(v))]} for m, v in rows]
        doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return json.dumps(doc).encode()

    looks = WINDOW // STEP
    stamps = [now - WINDOW + STEP * (k + 1) for k in range(looks)]
    xids = [
        {"metric": {"instance": n["instance"], "xid": str(c)},
         "values": [[t, str(k)] for t in stamps]}
        for n in nodes for c, k in n["xids"].items()
    ]  # fmt: skip
    inst = [{"instance": n["instance"]} for n in nodes]
    keys = ("instance", "instance_id", "image_id", "shape")
    return {
        "info": vector([({k: n[k] for k in keys}, 1) for n in nodes]),
        "launched": vector(
            [
                (
                    {
                        "instance": n["instance"],
                        "imagectl_instance_id": n["instance_id"],
                        "imagectl_image_id": n["image_id"],
                        "imagectl_shape": n["shape"],
                    },
                    now - WINDOW,  # first scraped at the window's start
                )
                for n in nodes
            ]
        ),
        "looks": vector([(m, looks) for m in inst]),
        "lag": vector([]),
        "clock": vector([]),
        "read_ok": vector([(m, 1) for m in inst]),
        "passed": vector([(m, n["passed"]) for m, n in zip(inst, nodes, strict=True)]),
        "worst": vector([(m, n["worst"]) for m, n in zip(inst, nodes, strict=True) if n["worst"]]),
        "problems": vector(
            [(m, n["problems"]) for m, n in zip(inst, nodes, strict=True) if n["problems"]]
        ),
        "xid_base": vector(
            [
                ({"instance": n["instance"], "xid": str(c)}, k)
                for n in nodes
                for c, k in n["xids"].items()
            ]
        ),
        "xids": json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": xids}}
        ).encode(),
    }


def decide_in_memory(answers: dict[str, bytes], now: float | None = None) -> str:
    policy = load_policy()
    at = time.time() if now is None else now
    vectors = {k: parse_vector(v, "benchmark") for k, v in answers.items() if k not in MATRIX}
    matrix = parse_matrix(answers["xids"], "benchmark")
    evidence = build(vectors, matrix, at=at, window_s=WINDOW, policy=policy)
    decision, _reason, _shapes = decide(
        evidence.nodes, {NEW}, {OLD}, policy, launch_records=evidence.launch_records
    )
    return decision


def openmetrics(nodes: list[dict[str, Any]], now: float) -> str:
    """The fleet's series as OpenMetrics, one sample a minute over the window (and the
    five minutes before it: a counter's value at the window's start)."""
    stamps = [now - WINDOW - 300 + STEP * k for k in range((WINDOW + 300) // STEP + 1)]
    families: list[tuple[str, Any]] = [
        ("imagectl_node_info", lambda n, t: 1),
        ("up", lambda n, t: 1),
        ("imagectl_validation_passed", lambda n, t: n["passed"]),
        ("imagectl_validation_worst_action", lambda n, t: n["worst"]),
        ("imagectl_node_boot_timestamp_seconds", lambda n, t: n["boot"]),
        ("imagectl_watch_timestamp_seconds", lambda n, t: t),
        ("imagectl_watch_read_ok", lambda n, t: 1),
        ("imagectl_gpu_problems", lambda n, t: n["problems"]),
    ]
    lines = []
    for name, value in families:
        lines.append(f"# TYPE {name} gauge")
        for n in nodes:
            labels = f'instance="{n["instance"]}"'
            if name == "imagectl_node_info":
                labels += (f',instance_id="{n["instance_id"]}",image_id="{n["image_id"]}",'
                           f'shape="{n["shape"]}",stack="{STACK}"')  # fmt: skip
            if name == "up":
                labels += (f',imagectl_instance_id="{n["instance_id"]}",'
                           f'imagectl_image_id="{n["image_id"]}",'
                           f'imagectl_shape="{n["shape"]}"')  # fmt: skip
            if name == "imagectl_gpu_problems":
                labels += ',reason="hw_slowdown"'
            lines += [f"{name}{{{labels}}} {value(n, t)} {t:.3f}" for t in stamps]
    lines.append("# TYPE imagectl_xid_code_events counter")
    for n in nodes:
        for code, k in n["xids"].items():
            labels = f'instance="{n["instance"]}",xid="{code}"'
            lines += [f"imagectl_xid_code_events_total{{{labels}}} {k} {t:.3f}" for t in stamps]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process (``/proc/PID/stat``, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_prometheus(
    nodes: list[dict[str, Any]], now: float, repeat: int
) -> tuple[list[float], str]:
    promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
    if not promtool or not prometheus:
        sys.exit("--prometheus needs Debian's prometheus package (promtool, prometheus)")
    folder = Path(tempfile.mkdtemp(prefix="rollout-bench-"))
    try:
        source = folder / "fleet.om"
        source.write_text(openmetrics(nodes, now))
        t0 = time.perf_counter()
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source),
                        str(folder / "data")], check=True, capture_output=True)  # fmt: skip
        print(f"backfill: {time.perf_counter() - t0:.1f} s ({source.stat().st_size / 1e6:.0f} MB)")
        port = _port()
        config = folder / "p.yml"
        config.write_text("global: {scrape_interval: 1m}\nscrape_configs: []\n")
        proc = subprocess.Popen([prometheus, f"--config.file={config}",
                                 f"--storage.tsdb.path={folder / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}",
                                 "--storage.tsdb.retention.time=10y"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    urllib.request.urlopen(url + "/-/ready", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            policy = load_policy()
            times, cpus, decision = [], [], ""
            read(Prometheus(url, {}), STACK, WINDOW, now, policy)  # warm: chunks in memory
            for _ in range(repeat):
                t0, c0, p0 = time.perf_counter(), time.process_time(), _cpu_of(proc.pid)
                evidence = read(Prometheus(url, {}), STACK, WINDOW, now, policy)
                decision = decide(
                    evidence.nodes, {NEW}, {OLD}, policy, launch_records=evidence.launch_records
                )[0]
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0 + _cpu_of(proc.pid) - p0)
            print(
                f"CPU (imagectl + Prometheus, what a busy machine does not inflate): "
                f"{statistics.median(cpus):.3f} s median of {repeat}"
            )
            return times, decision
        finally:
            proc.terminate()
            proc.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, help="default 10,000 (--short: 1,000)")
    ap.add_argument("--repeat", type=int, help="default 5 (--short: 1)")
    ap.add_argument("--prometheus", action="store_true", help="query a real, backfilled Prometheus")
    ap.add_argument("--short", action="store_true", help="CI mode: 1,000 nodes, one run")
    args = ap.parse_args()
    n = args.nodes or (1_000 if args.short else 10_000)
    repeat = args.repeat or (1 if args.short else 5)
    now = time.time()
    nodes = fleet(n, now)
    if args.prometheus:
        times, decision = with_prometheus(nodes, now, repeat)
        where = "real Prometheus (backfilled TSDB), queries included"
    else:
        answers = bodies(nodes, now)
        size = sum(len(b) for b in answers.values())
        times, cpus = [], []
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            decision = decide_in_memory(answers, now)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        print(f"CPU: {statistics.median(cpus):.3f} s median of {repeat}")
        where = f"in memory, {size / 1e6:.1f} MB of Prometheus JSON parsed"
    median = statistics.median(times)
    print(f"nodes: {n}  ({where})")
    print(f"decision: {decision}")
    print(f"rollout decision: {median:.3f} s median of {repeat} (min {min(times):.3f} s)")
    print(f"nodes per second: {n / median:.0f}")
    # the goal is for 10,000 nodes; a smaller fleet is scaled up linearly to compare
    scaled = median * 10_000 / n
    print(f"10,000-node equivalent: {scaled:.3f} s = {scaled / GOAL_S:.2f}x the {GOAL_S:g} s goal")


if __name__ == "__main__":
    main()
