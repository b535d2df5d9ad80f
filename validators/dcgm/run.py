"""Run ``dcgmi diag -r <level> -j`` on this host with a hard timeout.

The record it returns is what ``imagectl snapshot`` stores as the snapshot's ``dcgm``
section and what replay judges: argv, exit code (negative: killed by that signal),
stdout as printed, the tail of stderr, duration, whether the hard timeout fired, or why
dcgmi could not be started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable

STDERR_TAIL = 4000
STDOUT_MAX = 4 * 1024 * 1024
# After the timeout: SIGTERM (dcgmi stops the running diagnostic on a signal,
# dcgmi/Diag.cpp ExecuteDiagOnServer), then SIGKILL to the whole process group.
TERM_GRACE_S = 5.0


def find_dcgmi(paths: Iterable[str]) -> str | None:
    found = shutil.which("dcgmi")
    if found:
        return found
    for path in paths:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_diag(
    level: int, timeout_s: float, *, search: Iterable[str] = (), grace_s: float = TERM_GRACE_S
) -> dict[str, object]:
    """Run the diagnostic; never raises for what dcgmi does (the record says it)."""
    dcgmi = find_dcgmi(search)
    record: dict[str, object] = {
        "level": level,
        "dcgmi": dcgmi,
        "argv": None,
        "exit_code": None,
        "timed_out": False,
        "timeout_s": round(timeout_s, 3),
        "duration_s": 0.0,
        "stdout": "",
        "stderr_tail": "",
        "error": None,
    }
    if dcgmi is None:
        record["error"] = "dcgmi not found (looked in PATH and " + ", ".join(search) + ")"
        return record
    argv = [dcgmi, "diag", "-r", str(level), "-j"]
    record["argv"] = argv
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills all of it
        )
    except OSError as exc:
        record["error"] = f"cannot start {dcgmi}: {exc.strerror or exc}"
        return record
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        record["timed_out"] = True
        _kill_group(proc, grace_s)
        try:
            out, err = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:  # a child that left the group holds the pipes
            out, err = b"", b"(output lost: a child of dcgmi kept its pipes open)"
    record["duration_s"] = round(time.monotonic() - started, 3)
    record["exit_code"] = proc.returncode
    record["stdout"] = out[:STDOUT_MAX].decode("utf-8", errors="replace")
    record["stderr_tail"] = err.decode("utf-8", errors="replace")[-STDERR_TAIL:]
    return record
