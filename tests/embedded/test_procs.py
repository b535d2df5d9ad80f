"""Children owns every process it starts: stopped on exit, on error and on SIGINT/SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from imagectl.embedded.procs import ChildFailed, Children, alive, descendants
from tests.support import default_signals

# A script that starts a process tree through Children (sleep + a shell with its own
# child), prints the pids, then waits forever for a signal.
SCRIPT = textwrap.dedent(
    """
    import sys, time
    from imagectl.embedded.procs import Children
    with Children(grace_s=2) as ch:
        a = ch.popen(["sleep", "300"], name="sleep")
        b = ch.popen(["sh", "-c", "sleep 300 & wait"], name="shell")
        print(a.pid, b.pid, flush=True)
        try:
            time.sleep(300)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
    """
)


def _wait_gone(pids: set[int], timeout: float = 15) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return set()
        time.sleep(0.1)
    return {p for p in pids if alive(p)}


def test_children_are_stopped_when_the_block_ends():
    with Children(grace_s=1) as ch:
        proc = ch.popen(["sleep", "300"], name="sleep")
        shell = ch.popen(["sh", "-c", "sleep 300 & wait"], name="shell")
        time.sleep(0.3)
        tree = {proc.pid, shell.pid} | descendants(shell.pid)
        assert len(tree) == 3 and all(alive(p) for p in tree)
    assert _wait_gone(tree) == set()


def test_children_are_stopped_when_the_block_raises():
    with pytest.raises(RuntimeError), Children(grace_s=1) as ch:
        proc = ch.popen(["sleep", "300"], name="sleep")
        raise RuntimeError("step failed")
    assert _wait_gone({proc.pid}) == set()


def test_run_reports_the_exit_status_and_output(tmp_path: Path):
    with Children() as ch:
        assert ch.run(["sh", "-c", "echo hello"], name="echo").strip() == "hello"
        with pytest.raises(ChildFailed) as err:
            ch.run(["sh", "-c", "echo broken >&2; exit 3"], name="broken")
        assert err.value.code == 3 and "broken" in str(err.value)
        with pytest.raises(ChildFailed, match="timed out"):
            ch.run(["sleep", "30"], name="slow", timeout=0.5)
        assert ch.pids() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_owner_stops_the_whole_tree(sig: int):
    owner = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        preexec_fn=default_signals,
    )
    try:
        assert owner.stdout is not None
        first, second = (int(x) for x in owner.stdout.readline().split())
        time.sleep(0.3)
        tree = {first, second} | descendants(second)
        assert len(tree) == 3 and all(alive(p) for p in tree)
        owner.send_signal(sig)
        owner.wait(timeout=20)
        assert _wait_gone(tree) == set(), "children survived the owner's signal"
    finally:
        if owner.poll() is None:
            owner.kill()


def test_sigkill_of_the_owner_still_takes_children_down():
    """The parent-death signal covers the one case no handler can (kill -9)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    assert owner.stdout is not None
    first, _second = (int(x) for x in owner.stdout.readline().split())
    owner.kill()
    owner.wait(timeout=10)
    assert _wait_gone({first}) == set()
