"""Timeouts that still diagnose, and interruptions that leave nothing behind.

The profile's budget leaves the collectives their own rendezvous and hang deadlines (so a
hang ends with the per-rank report, not a generic timeout), and when a stage's deadline
fires, or the validator gets Ctrl-C or SIGTERM, the worker ranks are killed and their
``imagectl-collectives-*`` folders removed. Ranks misbehave through the worker's documented
fault hook (IMAGECTL_FAULT_RANK), on the real launcher and the real gloo workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
import uuid
from pathlib import Path

import pytest

from imagectl.validators import budgets
from imagectl.validators.collectives.launch import Plan
from imagectl.validators.collectives.profiles import sweep_for
from imagectl.validators.results import Outcome
from imagectl.validators.session import _guarded
from tests.support import default_signals

IMAGECTL = str(Path(sys.executable).parent / "imagectl")


def _marked(marker: str) -> list[int]:
    """Pids of live processes whose environment carries ``marker``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            out.append(int(entry.name))
    return out


def _wait_gone(marker: str, timeout_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.parametrize(("device", "profile"), [(d, p) for d in ("cuda", "cpu")
                                                  for p in ("quick", "full", "burn")])  # fmt: skip
def test_stage_budget_outlasts_the_collectives_own_deadlines(device: str, profile: str) -> None:
    """quick used to give the collectives 180 s against a 300 s start timeout."""
    sweep = sweep_for(device, profile)
    own = max(Plan.start_timeout_s, sweep.join_timeout_s) + sweep.op_timeout_s
    assert budgets.collectives_s(device, profile) > own
    assert budgets.profile_s(device, profile) > budgets.collectives_s(device, profile)


def test_stage_deadline_kills_the_ranks_and_removes_their_folder(monkeypatch, tmp_path) -> None:
    from imagectl.validators.collectives import collective_checks

    marker = f"IMAGECTL_TEST_MARK={uuid.uuid4().hex}"
    key, value = marker.split("=")
    monkeypatch.setenv(key, value)
    monkeypatch.setenv("IMAGECTL_FAULT_RANK", "0:hang,1:hang")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def call(fn):  # the collectives' own hang deadline (600 s) is beyond the stage's
        return fn(
            types.SimpleNamespace(), device="cpu", profile="quick", nodes=None, ranks=2,
            ops=["all_reduce"], sizes=[4096], op_timeout_s=600, join_timeout_s=600,
        )  # fmt: skip

    started = time.monotonic()
    (result,) = _guarded("collectives.smoke", lambda: collective_checks, call, 12.0)
    assert time.monotonic() - started < 30
    assert result.outcome is Outcome.FAIL and "timed out" in result.message
    assert result.details["killed_process_groups"] == 2
    assert _wait_gone(marker) == [], "ranks outlived the stage deadline"
    assert not list(tmp_path.glob("imagectl-collectives-*"))


def _start_hung_validation(tmp_path: Path, marker: str) -> subprocess.Popen[bytes]:
    """``imagectl validate --profile quick`` on a shape without GPUs (the CPU path), both
    ranks hanging in the first collective; returns once they hang."""
    key, value = marker.split("=")
    env = dict(os.environ, TMPDIR=str(tmp_path), IMAGECTL_FAULT_RANK="0:hang,1:hang")
    env[key] = value
    log = tmp_path / "kern.log"
    log.write_text("")
    proc = subprocess.Popen(
        [IMAGECTL, "validate", "--profile", "quick", "--shape", "qemu-tcg", "--no-hygiene",
         "--kernel-log", str(log), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=default_signals,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        hanging = 0
        for path in tmp_path.glob("imagectl-collectives-*/events/rank-*.jsonl"):
            hanging += any(json.loads(x)["ev"] == "note" for x in path.read_text().splitlines())
        if hanging == 2:
            return proc
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the ranks never reached their hang")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_kills_the_ranks_and_removes_their_folder(tmp_path, sig) -> None:
    marker = f"IMAGECTL_TEST_MARK={uuid.uuid4().hex}"
    proc = _start_hung_validation(tmp_path, marker)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert b"Traceback" not in err, err.decode()[-2000:]
    assert _wait_gone(marker) == [], "ranks outlived the interrupted validator"
    assert not list(tmp_path.glob("imagectl-collectives-*"))
