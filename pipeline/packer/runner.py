"""Run packer, stream its machine-readable output, stop it cleanly.

Packer runs in its own session so that a terminal Ctrl-C reaches imagectl only;
imagectl then sends packer exactly one SIGINT (packer's own "cancel and clean up":
it terminates the build instance and deletes temporary keys and security groups),
waits up to ``cleanup_timeout`` seconds for it to exit and only then kills it. The same
happens on SIGTERM and when the run exceeds ``timeout``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from imagectl.core.errors import EXIT_FAILED, UserError
from imagectl.core.sockets import child_env
from imagectl.packer.machine_readable import PackerEvent, parse_line

if TYPE_CHECKING:
    from imagectl.core.signals import SignalHandler

EventCallback = Callable[[PackerEvent], None]


@dataclass
class PackerRun:
    command: list[str]
    returncode: int
    events: list[PackerEvent] = field(default_factory=list)
    other_output: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def errors(self) -> list[str]:
        return [e.text for e in self.events if e.is_error]


class PackerFailed(UserError):
    """packer exited non-zero."""

    exit_code = EXIT_FAILED

    def __init__(self, run: PackerRun):
        self.run = run
        detail = "; ".join(run.errors[-3:]) or "; ".join(run.other_output[-3:]) or "no message"
        super().__init__(
            f"packer exited with status {run.returncode}: {detail}",
            hint="The full output is in the build folder's packer.log",
        )


class PackerTimeout(PackerFailed):
    def __init__(self, run: PackerRun, timeout: float):
        self.timeout = timeout
        UserError.__init__(
            self,
            f"packer did not finish within {timeout:g} s and was cancelled "
            f"(exit {run.returncode} after cleanup)",
            hint="Raise --timeout or look at packer.log in the build folder",
        )
        self.run = run


class PackerCancelled(PackerFailed):
    exit_code = 130

    def __init__(self, run: PackerRun, signum: int):
        self.signum = signum
        UserError.__init__(
            self,
            f"the build was cancelled ({signal.Signals(signum).name}); packer cleaned up "
            f"and exited with status {run.returncode}",
        )
        self.run = run


class _Stop:
    """Why we are stopping packer (first reason wins)."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.signum: int = 0
        self.event = threading.Event()

    def set(self, reason: str, signum: int = 0) -> None:
        if self.reason is None:
            self.reason, self.signum = reason, signum
        self.event.set()


# Packer 1.6 serves each plugin (its builders and provisioners too) on a unix socket in
# $TMPDIR named packer-plugin<up to 10 digits>.
PLUGIN_SOCKET_ROOM = 32


def run(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    on_event: EventCallback | None = None,
    timeout: float | None = None,
    cleanup_timeout: float = 600.0,
    log_file: Path | None = None,
    check: bool = True,
) -> PackerRun:
    """Run ``command`` (a packer command line), calling ``on_event`` per parsed line."""
    started = time.monotonic()
    result = PackerRun(command=list(command), returncode=-1)
    stop = _Stop()
    log = log_file.open("a", encoding="utf-8") if log_file else None
    try:
        proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=child_env(PLUGIN_SOCKET_ROOM, env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
    except OSError as exc:
        if log:
            log.close()
        raise UserError(f"cannot start {command[0]}: {exc.strerror}") from exc

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if log:
                log.write(line)
                log.flush()
            event = parse_line(line)
            if event is None:
                if line.strip():
                    result.other_output.append(line.rstrip())
                continue
            result.events.append(event)
            if on_event:
                on_event(event)

    thread = threading.Thread(target=reader, name="packer-output", daemon=True)
    thread.start()
    previous = _install_handlers(stop)
    try:
        deadline = started + timeout if timeout else None
        while proc.poll() is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                stop.set("timeout")
            if stop.event.wait(0.2 if remaining is None else min(0.2, max(remaining, 0))):
                _cancel(proc, cleanup_timeout)
                break
    except KeyboardInterrupt:  # a second Ctrl-C while cleaning up, or no handler installed
        stop.set("signal", signal.SIGINT)
        _cancel(proc, cleanup_timeout)
    finally:
        _restore_handlers(previous)
        proc.wait()
        thread.join(timeout=10)
        if log:
            log.close()
    result.returncode = proc.returncode
    result.duration_s = time.monotonic() - started
    if stop.reason == "timeout":
        raise PackerTimeout(result, timeout or 0)
    if stop.reason == "signal":
        raise PackerCancelled(result, stop.signum)
    if check and result.returncode != 0:
        raise PackerFailed(result)
    return result


def _cancel(proc: subprocess.Popen[str], cleanup_timeout: float) -> None:
    """SIGINT once (packer cleans up), wait bounded, then SIGKILL the process group."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=cleanup_timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _install_handlers(stop: _Stop) -> dict[int, SignalHandler]:
    """SIGINT/SIGTERM -> stop (only possible in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set("signal", signum)

    previous: dict[int, SignalHandler] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    return previous


def _restore_handlers(previous: dict[int, SignalHandler]) -> None:
    for sig, old in previous.items():
        signal.signal(sig, old)
