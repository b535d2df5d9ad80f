"""Ctrl-C stops every QEMU, packer and SSH process a local run started (checked in /proc).

Two real cases: SIGINT to ``imagectl run`` while site.yml provisions the root natively
in a chroot (ansible stops, every mount below the state folder is gone, no root is left
behind), and SIGINT while Packer's QEMU VM boots (packer cancels and takes its VM down).
SIGINT while a validation instance boots is in test_one_pipeline.py. All need the
cached base image, so all are ``e2e``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from states import second_state

from imagectl.embedded.procs import alive, descendants
from tests.support import default_signals

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _processes_mentioning(text: str) -> list[tuple[int, str]]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            line = _cmdline(int(entry))
            if text in line and alive(int(entry)):
                out.append((int(entry), line[:200]))
    return out


def _watch_until(proc: subprocess.Popen, want: str, timeout: float) -> set[int]:
    """Collect the descendants of ``proc`` until one whose command line has ``want``
    has been alive for a few seconds; returns every pid seen."""
    seen: set[int] = set()
    first_hit: float | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before the VM started"
        kids = descendants(proc.pid)
        seen |= kids
        hit = any(want in _cmdline(p) for p in kids)
        if hit and first_hit is None:
            first_hit = time.monotonic()
        if first_hit is not None and time.monotonic() - first_hit > 5:
            return seen
        time.sleep(0.3)
    pytest.fail(f"no '{want}' process within {timeout:g} s")


def _gone(pids: set[int], timeout: float = 30) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return set()
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env.update(IMAGECTL_STATE_DIR=str(state), COLUMNS="160")
    return env


def _ctrl_c_rebuild_when(
    state: Path, want: str, while_running: Any
) -> tuple[set[int], str, list[Path]]:
    """Start ``imagectl run --stack local --rebuild`` in its own session; once a process
    whose command line has ``want`` has run a few seconds, check ``while_running(seen)``
    and send SIGINT. Returns every pid seen, the output and the build folders the run
    made; the exit must be 130."""
    before = set((state / "builds").glob("*"))
    imagectl = str(Path(sys.executable).parent / "imagectl")
    proc = subprocess.Popen(
        [imagectl, "--root", str(REPO), "run", "--stack", "local", "--rebuild"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(state),
        start_new_session=True,
        preexec_fn=default_signals,
    )  # fmt: skip
    try:
        # The base may have to be built first (cold state): allow for it.
        seen = _watch_until(proc, want, timeout=1500)
        while_running(seen)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.decode(errors="replace")
    assert proc.returncode == 130, text[-2000:]
    return seen, text, sorted(set((state / "builds").glob("*")) - before)


def _mounts_below(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    lines = Path("/proc/mounts").read_text().splitlines()
    return [m.split()[1] for m in lines if len(m.split()) > 1 and m.split()[1].startswith(prefix)]


# Each in a state folder of its own that shares the session's base (states.py): a build
# the other group makes in the session's folder meanwhile is not this run's. The groups
# of the two e2e workers (conftest.py), balanced by their measured lengths.
@pytest.mark.xdist_group("local")
def test_ctrl_c_during_the_chroot_provisioning_unmounts_and_stops_ansible(
    e2e_state: Path, tmp_path: Path
):
    state = second_state(e2e_state, tmp_path)

    def mounted(_seen: set[int]) -> None:
        assert _mounts_below(state), "the chroot had no mounts while ansible ran"

    # ansible-playbook with the chroot inventory: the native provisioning pass
    seen, _text, _made = _ctrl_c_rebuild_when(state, "chroot-inventory.ini", mounted)
    assert _gone(seen) == set(), "ansible or its chroot processes survived Ctrl-C"
    assert _mounts_below(state) == []  # /proc, /sys, /dev, /dev/pts all unmounted
    assert list((state / "builds").glob("*/rootfs")) == []


@pytest.mark.xdist_group("clouds")
def test_ctrl_c_during_the_packer_build_stops_packer_and_its_vm(e2e_state: Path, tmp_path: Path):
    state = second_state(e2e_state, tmp_path)

    def vm_running(seen: set[int]) -> None:
        qemus = {p for p in seen if "qemu-system" in _cmdline(p)}
        assert qemus, "packer's VM was not among the run's processes"

    seen, text, made = _ctrl_c_rebuild_when(state, "qemu-system-x86_64", vm_running)
    assert "interrupted" in text
    assert _gone(seen) == set(), "processes of the run survived Ctrl-C"
    # nothing that names the run's build folder is left, even outside its process tree
    assert made, "the run made no build folder"
    assert [p for folder in made for p in _processes_mentioning(str(folder))] == []
