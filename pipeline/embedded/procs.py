"""One owner for every child process of a local run (qemu, ssh, scp, debootstrap...).

``Children`` is a context manager. Each child starts in its own process group and
session (so a terminal Ctrl-C reaches imagectl only) and, on Linux, with a parent-death
signal (so even ``kill -9`` of imagectl takes qemu down). On leaving the block — normal
exit, exception, SIGINT, SIGTERM or SIGHUP — every child still alive gets SIGTERM on its
whole group, then SIGKILL after a grace period. ``atexit`` repeats the sweep for paths
that bypass ``__exit__``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

from imagectl.core.signals import SignalHandler

# what signal.signal() returns and takes: a handler, SIG_DFL/SIG_IGN, or None (not set
# from Python)

PR_SET_PDEATHSIG = 1


class Terminated(BaseException):
    """SIGTERM / SIGHUP arrived: unwind like KeyboardInterrupt so cleanup runs."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


class ChildFailed(Exception):
    def __init__(self, name: str, argv: Sequence[str], code: int, tail: str):
        self.name, self.argv, self.code, self.tail = name, list(argv), code, tail
        super().__init__(f"{name} exited with status {code}: {tail[-600:].strip()}")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> set[int]:
    """Every live process whose parent chain leads to ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        nxt = {child for child, parent in parents.items() if parent in frontier}
        nxt -= found
        found |= nxt
        frontier = nxt
    return found


class Children:
    """Owns child processes; stops them all when the block ends, however it ends."""

    def __init__(self, grace_s: float = 8.0):
        self.grace_s = grace_s
        self._procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._lock = threading.Lock()
        self._old_handlers: dict[int, SignalHandler] = {}

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> Children:
        atexit.register(self.stop_all)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            # SIGINT keeps Python's KeyboardInterrupt, unless someone replaced it.
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                self._old_handlers[signal.SIGINT] = signal.signal(
                    signal.SIGINT, signal.default_int_handler
                )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop_all()
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)
            self._old_handlers.clear()
            atexit.unregister(self.stop_all)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        raise Terminated(signum)

    # -- starting ------------------------------------------------------------------
    def popen(
        self,
        argv: Sequence[str],
        *,
        name: str,
        stdout: IO[bytes] | IO[str] | int | None = subprocess.DEVNULL,
        stderr: IO[bytes] | IO[str] | int | None = subprocess.STDOUT,
        stdin: IO[bytes] | IO[str] | int | None = subprocess.DEVNULL,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            list(argv),
            stdout=stdout,
            stderr=stderr,
            stdin=stdin,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        with self._lock:
            self._procs.append((name, proc))
        return proc

    def run(
        self,
        argv: Sequence[str],
        *,
        name: str,
        timeout: float | None = None,
        log: Path | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
        input_text: str | None = None,
    ) -> str:
        """Run to completion (owned, so Ctrl-C stops it); return its output."""
        out_path = log
        fh = out_path.open("ab") if out_path else None
        proc = self.popen(
            argv,
            name=name,
            stdout=fh if fh else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            env=env,
        )
        try:
            data, _ = proc.communicate(
                input=input_text.encode() if input_text is not None else None, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            self.stop(proc)
            raise ChildFailed(name, argv, -1, f"timed out after {timeout:g} s") from None
        finally:
            if fh:
                fh.close()
            self._forget(proc)
        text = data.decode(errors="replace") if data else ""
        if fh and out_path:
            text = _tail(out_path)
        if check and proc.returncode != 0:
            raise ChildFailed(name, argv, proc.returncode, text[-2000:])
        return text

    def stream(
        self,
        argv: Sequence[str],
        *,
        name: str,
        on_line: Callable[[str], None],
        log: Path,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """Run to completion, each output line to ``log`` and ``on_line`` as it comes."""
        proc = self.popen(argv, name=name, stdout=subprocess.PIPE, env=env)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            self.stop(proc)

        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
        try:
            assert proc.stdout is not None
            with log.open("ab") as fh:
                for raw in proc.stdout:
                    fh.write(raw)
                    fh.flush()
                    on_line(raw.decode(errors="replace").rstrip())
            proc.wait()
        finally:
            if timer is not None:
                timer.cancel()
            if proc.poll() is None:
                self.stop(proc)
            self._forget(proc)
        if proc.returncode != 0:
            tail = f"timed out after {timeout:g} s" if expired.is_set() else _tail(log)[-2000:]
            raise ChildFailed(name, argv, proc.returncode, tail)

    # -- stopping ------------------------------------------------------------------
    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for _, p in self._procs if p.poll() is None]

    def stop(self, proc: subprocess.Popen[bytes], grace_s: float | None = None) -> None:
        grace = self.grace_s if grace_s is None else grace_s
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        # The group may outlive its leader (a helper the child started).
        _signal_group(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self._forget(proc)

    def stop_all(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for _, proc in reversed(procs):
            self.stop(proc)

    def _forget(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs = [(n, p) for n, p in self._procs if p is not proc]


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _tail(path: Path, size: int = 4000) -> str:
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode(errors="replace")
