"""All five collectives on gloo with real worker processes, and the faults a host can show.

Faults come from the worker's documented hook (IMAGECTL_FAULT_RANK), honoured by the
production code path: a rank that hangs, raises, crashes, never joins or sends bad data.
"""

from __future__ import annotations

import os
import types

import pytest

from imagectl.validators.collectives import collective_checks
from imagectl.validators.collectives.arithmetic import OPS, busbw_gbps
from imagectl.validators.results import Action, Outcome
from tests.support import default_signals

torch = pytest.importorskip("torch") if os.environ.get("CI") != "true" else __import__("torch")

EXPECT = types.SimpleNamespace(shape=None, gpu=None, gpu_count=0, nccl="2.26.2-1+cuda12.8")
SMALL = [1024, 65536, 1 << 20]


def run(
    ranks,
    *,
    ops=None,
    sizes=None,
    fault=None,
    monkeypatch=None,
    op_timeout_s=None,
    join_timeout_s=60,
):
    """One real run; the join timeout is generous: importing torch in 4 processes on a busy
    2-core machine can leave one rank many seconds behind the first."""
    if fault:
        monkeypatch.setenv("IMAGECTL_FAULT_RANK", fault)
    checks = collective_checks(
        EXPECT,
        device="cpu",
        profile="quick",
        nodes=None,
        ranks=ranks,
        ops=ops,
        sizes=sizes or SMALL,
        join_timeout_s=join_timeout_s,
        op_timeout_s=op_timeout_s or 30,
    )
    return {c.id: c for c in checks}


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def assert_no_orphans(checks):
    pids = [
        r["pid"] for r in checks["collective.rendezvous"].details["ranks"].values() if r.get("pid")
    ]
    assert pids, "the report names every worker's pid"
    assert not [p for p in pids if alive(p)], "every worker process is gone"


def assert_busbw_arithmetic(check, op, nranks):
    for row in check.details["sizes"]:
        if op in ("all_gather", "reduce_scatter", "all_to_all"):
            assert row["bytes"] % (16 * nranks) == 0  # 4-element aligned chunk per rank
        assert row["busbw_gbps"] == pytest.approx(
            busbw_gbps(op, row["bytes"], row["time_us"] / 1e6, nranks), rel=1e-4
        )
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / row["time_us"] / 1e3, rel=1e-4)


@pytest.mark.parametrize("nranks", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_all_five_collectives_values_and_busbw(nranks):
    checks = run(nranks)
    rdzv = checks["collective.rendezvous"]
    assert rdzv.outcome is Outcome.PASS, rdzv.message
    ranks = rdzv.details["ranks"]
    assert sorted(ranks) == [str(r) for r in range(nranks)]
    for info in ranks.values():
        assert info["status"] == "finished"
        assert 0 < info["joined_s"] <= info["first_collective_s"]
    for op in OPS:
        check = checks[f"collective.{op}"]
        assert check.outcome is Outcome.PASS, check.message
        assert check.details["floors"] == "not applicable on cpu"
        assert check.expected is None
        sizes = check.details["sizes"]
        assert len(sizes) == len(SMALL) and all(s["ok"] for s in sizes)
        assert all(s["ranks_reported"] == nranks for s in sizes)
        assert check.measured == sizes[-1]["busbw_gbps"] > 0
        assert_busbw_arithmetic(check, op, nranks)
    assert checks["collective.nccl_version"].outcome is Outcome.SKIP
    assert_no_orphans(checks)


def test_a_rank_sending_bad_data_fails_that_collective_on_every_rank(monkeypatch):
    checks = run(
        3,
        ops=["all_reduce", "reduce_scatter"],
        sizes=[4096],
        fault="2:corrupt@reduce_scatter",
        monkeypatch=monkeypatch,
    )
    assert checks["collective.all_reduce"].outcome is Outcome.PASS
    bad = checks["collective.reduce_scatter"]
    assert bad.outcome is Outcome.FAIL and bad.action is Action.RESET_GPU
    (row,) = bad.details["sizes"]
    # Rank 2 added 1000 to element 0 of what it sends: element 0 belongs to rank 0's chunk.
    assert row["mismatches"]["0"]["first_index"] == 0
    assert row["mismatches"]["0"]["got"] - row["mismatches"]["0"]["expected"] == 1000


def test_a_hung_rank_is_named_and_the_validator_returns(monkeypatch):
    checks = run(
        2,
        ops=["all_reduce", "all_gather", "broadcast"],
        sizes=[4096],
        fault="1:hang@all_gather",
        monkeypatch=monkeypatch,
        op_timeout_s=6,
    )
    assert checks["collective.all_reduce"].outcome is Outcome.PASS
    hung = checks["collective.all_gather"]
    assert hung.outcome is Outcome.FAIL and hung.action is Action.REBOOT
    assert hung.details["failure"] == "hang"
    assert hung.details["arrived"] == [0] and hung.details["missing"] == [1]
    assert "rank" in hung.message and "never did" in hung.message
    assert hung.details["ranks"]["0"]["status"].startswith("waiting in all_gather")
    assert checks["collective.broadcast"].outcome is Outcome.SKIP
    assert_no_orphans(checks)


@pytest.mark.parametrize("mode", ["raise", "crash"])
def test_a_rank_that_dies_is_reported_with_its_error(monkeypatch, mode):
    checks = run(2, ops=["all_reduce"], sizes=[4096], fault=f"1:{mode}", monkeypatch=monkeypatch)
    dead = checks["collective.all_reduce"]
    assert dead.outcome is Outcome.FAIL
    assert dead.details["failure"] == "died"
    assert dead.message.startswith("rank 1 died")
    info = dead.details["ranks"]["1"]
    assert info["status"] == "died"
    if mode == "raise":
        assert "injected fault" in info["error"] and "Traceback" in info["traceback"]
    else:
        assert info["exit_code"] == -9 and "SIGKILL" in info["error"]
    assert_no_orphans(checks)


def test_a_rank_that_never_joins_fails_the_rendezvous(monkeypatch):
    # The only healthy rank starts the clock when it enters: no race with a slow peer.
    checks = run(
        2,
        ops=["all_reduce"],
        sizes=[4096],
        fault="1:never_join",
        monkeypatch=monkeypatch,
        join_timeout_s=8,
    )
    rdzv = checks["collective.rendezvous"]
    assert rdzv.outcome is Outcome.FAIL
    assert rdzv.details["failure"] == "rendezvous"
    assert rdzv.details["arrived"] == [0] and rdzv.details["missing"] == [1]
    assert rdzv.details["ranks"]["1"]["status"] == "never entered the rendezvous"
    assert checks["collective.all_reduce"].outcome is Outcome.SKIP
    assert_no_orphans(checks)


@pytest.mark.slow
def test_killing_the_validator_leaves_no_rank_behind(tmp_path):
    """The validator itself is SIGKILLed while both ranks hang: the ranks exit on their own."""
    import json
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import types; from imagectl.validators.collectives import collective_checks; "
        "collective_checks(types.SimpleNamespace(), device='cpu', profile='quick', nodes=None, "
        "ranks=2, ops=['all_reduce'], sizes=[4096], op_timeout_s=600)"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path), IMAGECTL_FAULT_RANK="0:hang,1:hang")
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, preexec_fn=default_signals)
    pids: dict[int, int] = {}
    deadline = time.monotonic() + 120
    while len(pids) < 2 and time.monotonic() < deadline:
        for path in tmp_path.glob("imagectl-collectives-*/events/rank-*.jsonl"):
            for line in path.read_text().splitlines():
                ev = json.loads(line)
                if ev["ev"] == "note":  # past "started": the rank is hanging now
                    pids[ev["rank"]] = next(
                        json.loads(x)["pid"]
                        for x in path.read_text().splitlines()
                        if '"started"' in x
                    )
        time.sleep(0.2)
    assert len(pids) == 2, "both ranks started"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while any(alive(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in pids.values() if alive(p)], "ranks outlived the validator"
