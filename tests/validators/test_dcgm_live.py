"""DCGM diagnostics live: the real subprocess path against a stand-in ``dcgmi`` on PATH
(prints a recorded run, hangs, crashes, prints garbage), and ``imagectl snapshot
--dcgm-level N`` recording what replay then judges."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from validator_support import imagectl_in_process

from imagectl.validators.dcgm import dcgm_checks
from imagectl.validators.dcgm.run import run_diag
from imagectl.validators.dcgm.table import tables
from imagectl.validators.expectations import Expectations
from imagectl.validators.results import Action, Outcome

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
PINNED = Expectations(dcgm="1:4.4.1-1")


@pytest.fixture
def fake_dcgmi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install a shell script as ``dcgmi`` first on PATH; returns a writer for its body."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def install(body: str, stdout_of: str | None = None) -> Path:
        if stdout_of is not None:
            out = tmp_path / f"{stdout_of}.out"
            text = json.loads((FIXTURES / "recordings" / f"{stdout_of}.json").read_text())["stdout"]
            out.write_text(text)
            body = body.replace("@OUT@", str(out))
        script = bin_dir / "dcgmi"
        script.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\n{body}\n')
        script.chmod(0o755)
        return tmp_path

    return install


def live(profile: str = "quick", deadline_s: float = 60.0) -> list:
    return dcgm_checks(profile, PINNED, recorded=None, replay=False, deadline_s=deadline_s)


def test_live_run_parses_dcgmis_json_and_runs_the_profiles_level(fake_dcgmi) -> None:
    where = fake_dcgmi("cat @OUT@\nexit 0", stdout_of="h100-8x-r2-pass")
    results = live("quick")
    assert (where / "args").read_text().split() == ["diag", "-r", "2", "-j"]
    assert results[0].outcome == Outcome.PASS and results[0].details["exit_code"] == 0
    assert len([r for r in results if r.id.startswith("dcgm.") and r.gpu is not None]) == 24
    live("full")
    assert (where / "args").read_text().split() == ["diag", "-r", "3", "-j"]


def test_live_failure_takes_its_action(fake_dcgmi) -> None:
    fake_dcgmi("cat @OUT@\nexit 205", stdout_of="h100-8x-r2-memory-mismatch")
    failing = [r for r in live() if r.failed]
    assert [(r.id, r.gpu, r.action) for r in failing] == [("dcgm.memory", 3, Action.ISOLATE_RMA)]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_hang_is_a_failed_check_and_the_process_group_is_killed(fake_dcgmi) -> None:
    where = fake_dcgmi(
        "sleep 60 &\necho $! > @DIR@/child\nsleep 60".replace("@DIR@", "$(dirname $0)/..")
    )
    started = time.monotonic()
    (run,) = live(deadline_s=3.0)  # hard timeout: the deadline less the judging margin
    assert time.monotonic() - started < 45  # the fake dcgmi sleeps 60 s unless killed
    assert run.outcome == Outcome.FAIL and run.action == Action.REBOOT
    assert "quick profile's remaining time" in run.message and run.details["timeout_s"] <= 1.5
    child = int((where / "child").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the background child of dcgmi survived the timeout"


def test_a_dcgmi_ignoring_sigterm_is_killed(fake_dcgmi) -> None:
    fake_dcgmi("trap '' TERM\nsleep 60")
    started = time.monotonic()
    record = run_diag(2, 0.5, grace_s=0.5)
    assert record["timed_out"] and record["exit_code"] == -9
    assert time.monotonic() - started < 45  # the fake dcgmi sleeps 60 s unless killed


@pytest.mark.parametrize(
    ("body", "outcome", "needle"),
    [
        ("kill -SEGV $$", Outcome.ERROR, "SIGSEGV"),
        ("echo 'Error: unable to connect' >&2\nexit 1", Outcome.ERROR, "unable to connect"),
        ("echo 'Successfully ran diagnostic'\nexit 0", Outcome.ERROR, "not JSON"),
        (
            'echo \'{"DCGM Diagnostic": {"test_categories": "all good"}}\'',
            Outcome.ERROR,
            "expected an array",
        ),
    ],
)
def test_crash_and_garbage_never_pass(fake_dcgmi, body: str, outcome: Outcome, needle: str) -> None:
    fake_dcgmi(body)
    (run,) = live()
    assert run.outcome == outcome and run.failed and needle in run.message


def test_missing_dcgmi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if any(os.path.exists(p) for p in tables().dcgmi_paths):
        pytest.skip("this host has dcgmi installed")
    monkeypatch.setenv("PATH", str(tmp_path))
    (pinned,) = live()
    assert pinned.outcome == Outcome.FAIL and pinned.action == Action.BLOCK_IMAGE
    (unpinned,) = dcgm_checks("quick", Expectations(), recorded=None, replay=False, deadline_s=9)
    assert unpinned.outcome == Outcome.SKIP


def test_snapshot_records_the_run_and_replay_judges_it(fake_dcgmi, tmp_path: Path) -> None:
    fake_dcgmi("cat @OUT@\nexit 205", stdout_of="h100-8x-r2-memory-mismatch")
    snap = tmp_path / "snap.json"
    out = imagectl_in_process("snapshot", "-o", str(snap), "--dcgm-level", "2")
    assert out.returncode == 0, out.stderr
    section = json.loads(snap.read_text())["dcgm"]
    assert section["argv"][1:] == ["diag", "-r", "2", "-j"] and section["exit_code"] == 205
    rep = imagectl_in_process("validate", "--profile", "quick", "--replay", str(snap), "--json")
    receipt = json.loads(rep.stdout)
    failing = [
        c for c in receipt["checks"] if c["id"].startswith("dcgm.") and c["outcome"] == "fail"
    ]
    assert [(c["id"], c["gpu"], c["action"]) for c in failing] == [
        ("dcgm.memory", 3, "ISOLATE_RMA")
    ]
