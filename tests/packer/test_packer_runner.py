"""The wrapper's process handling: streaming, timeout, Ctrl-C/SIGTERM, missing binary.

Cancellation and timeout use a small script standing in for a slow packer (prints
machine-readable lines, cleans up on SIGINT like packer does) plus one run of the
real packer, which must stop and clean up on the wrapper's SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from imagectl.core.errors import UserError
from imagectl.packer.binary import find_packer, parse_version
from imagectl.packer.machine_readable import PackerEvent
from imagectl.packer.runner import PackerCancelled, PackerFailed, PackerTimeout, run
from tests.support import require_tool

SLOW_PACKER = textwrap.dedent(
    """\
    import signal, sys, time
    marker = sys.argv[1]
    ignore = len(sys.argv) > 2
    def on_int(signum, frame):
        print("%d,,ui,say,==> cancelling%%!(PACKER_COMMA) cleaning up" % time.time(), flush=True)
        if ignore:
            return
        time.sleep(0.3)
        open(marker, "w").write("cleaned")
        sys.exit(1)
    signal.signal(signal.SIGINT, on_int)
    print("%d,,ui,say,==> started" % time.time(), flush=True)
    for i in range(600):
        print("%d,null.x,ui,message,step %d" % (time.time(), i), flush=True)
        time.sleep(0.1)
    """
)


def _slow(tmp_path: Path, *extra: str) -> tuple[list[str], Path]:
    script = tmp_path / "slow_packer.py"
    script.write_text(SLOW_PACKER)
    marker = tmp_path / "cleaned"
    return [sys.executable, str(script), str(marker), *extra], marker


def test_streams_events_and_reports_failure(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(
        "print('1,,ui,say,==> hello', flush=True)\n"
        "print('not machine readable', flush=True)\n"
        "print('2,,ui,error,Build x errored: boom%!(PACKER_COMMA) really', flush=True)\n"
        "raise SystemExit(3)\n"
    )
    seen: list[PackerEvent] = []
    with pytest.raises(PackerFailed) as info:
        run([sys.executable, str(script)], on_event=seen.append, log_file=tmp_path / "log")
    assert [e.text for e in seen] == ["==> hello", "Build x errored: boom, really"]
    assert info.value.run.returncode == 3
    assert "boom, really" in info.value.message
    assert info.value.exit_code == 1
    assert "not machine readable" in (tmp_path / "log").read_text()


def test_timeout_cancels_and_waits_for_cleanup(tmp_path: Path) -> None:
    cmd, marker = _slow(tmp_path)
    started = time.monotonic()
    with pytest.raises(PackerTimeout) as info:
        run(cmd, timeout=1.0, cleanup_timeout=10)
    assert marker.read_text() == "cleaned", "packer was not given the chance to clean up"
    assert info.value.run.returncode == 1
    assert any("cleaning up" in e.text for e in info.value.run.events)
    assert time.monotonic() - started < 40  # the fake packer runs 60 s unless stopped


def test_ctrl_c_sends_one_sigint_and_waits(tmp_path: Path) -> None:
    cmd, marker = _slow(tmp_path)

    def previous(signum: int, frame: object) -> None:
        raise AssertionError("the wrapper's own handler should have taken this SIGINT")

    # A known handler of our own: the one inherited depends on how pytest was started
    # (a shell's background job starts with SIGINT ignored).
    inherited = signal.signal(signal.SIGINT, previous)
    timer = threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(PackerCancelled) as info:
            run(cmd, cleanup_timeout=10)
        # The wrapper restores the previous handler afterwards.
        assert signal.getsignal(signal.SIGINT) is previous
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, inherited)
    assert marker.read_text() == "cleaned"
    assert info.value.signum == signal.SIGINT
    assert info.value.exit_code == 130


def test_sigterm_cancels_too(tmp_path: Path) -> None:
    cmd, marker = _slow(tmp_path)
    timer = threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    with pytest.raises(PackerCancelled) as info:
        run(cmd, cleanup_timeout=10)
    assert info.value.signum == signal.SIGTERM
    assert marker.exists()


def test_packer_that_ignores_sigint_is_killed_after_cleanup_timeout(tmp_path: Path) -> None:
    cmd, marker = _slow(tmp_path, "ignore-sigint")
    started = time.monotonic()
    with pytest.raises(PackerTimeout) as info:
        run(cmd, timeout=0.5, cleanup_timeout=1.0)
    assert info.value.run.returncode == -signal.SIGKILL
    assert not marker.exists()
    assert time.monotonic() - started < 40  # it ignores SIGINT and runs 60 s unless killed


def test_real_packer_stops_on_the_wrappers_sigint(tmp_path: Path) -> None:
    packer = find_packer(require_tool("packer"))
    template = tmp_path / "slow.pkr.hcl"
    template.write_text(
        'source "null" "slow" {\n  communicator = "none"\n}\n'
        'build {\n  sources = ["source.null.slow"]\n'
        '  provisioner "shell-local" {\n    inline = ["sleep 60"]\n  }\n}\n'
    )
    seen: list[PackerEvent] = []
    started = time.monotonic()
    with pytest.raises(PackerTimeout) as info:
        run(
            [packer.path, "build", "-machine-readable", str(template)],
            on_event=seen.append,
            timeout=3,
            cleanup_timeout=30,
        )
    assert time.monotonic() - started < 30
    assert info.value.run.returncode != 0
    assert any("cancel" in e.text.lower() or "interrupt" in e.text.lower() for e in seen), [
        e.text for e in seen
    ]


def test_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("IMAGECTL_PACKER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="not found on PATH"):
        find_packer()
    monkeypatch.setenv("IMAGECTL_PACKER", str(tmp_path / "packer"))
    with pytest.raises(UserError, match="does not exist or is not executable"):
        find_packer()


def test_real_packer_version_and_too_old_check() -> None:
    path = require_tool("packer")
    packer = find_packer(path)
    assert packer.version >= (1, 6, 6)
    newer = (packer.version[0], packer.version[1] + 1, 0)
    with pytest.raises(UserError, match=r"too old.*Packer >= "):
        find_packer(path, minimum=newer)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Packer v1.6.6\n", (1, 6, 6)), ("1.11.2", (1, 11, 2)), ("garbage", None)],
)
def test_parse_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected
