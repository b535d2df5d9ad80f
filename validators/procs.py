"""Worker processes and scratch folders a validation started, so that a deadline, Ctrl-C
or SIGTERM kills the processes and removes the folders (never left running or behind).

The collectives launcher registers its ranks' process groups and its
``imagectl-collectives-*`` folder here; the session calls ``cleanup()`` when a stage's
deadline fires and when the run is interrupted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time

_lock = threading.Lock()
_groups: set[int] = set()
_folders: set[str] = set()


def register_group(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)


def register_folder(path: str) -> None:
    with _lock:
        _folders.add(path)


def release(*, group: int | None = None, folder: str | None = None) -> None:
    with _lock:
        if group is not None:
            _groups.discard(group)
        if folder is not None:
            _folders.discard(folder)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def cleanup(grace_s: float = 3.0) -> dict[str, int]:
    """SIGTERM then SIGKILL every registered process group; remove every folder."""
    with _lock:
        groups, folders = sorted(_groups), sorted(_folders)
        _groups.clear()
        _folders.clear()
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while time.monotonic() < end and any(_alive(g) for g in groups):
        time.sleep(0.05)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for path in folders:
        shutil.rmtree(path, ignore_errors=True)
    return {"groups": len(groups), "folders": len(folders)}
