"""imagectl's own wheel (``pip wheel --no-deps`` of the checkout): what every image's
validator venv and every offline bundle installs beside the locked dependencies."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.core.fsutil import open_lock_file
from imagectl.paths import Workspace, state_dir


@contextlib.contextmanager
def _source_tree_lock(root: Path) -> Iterator[None]:
    """One wheel build at a time per source tree: setuptools builds in ``<root>/build``,
    and two concurrent builds there (parallel builds or test workers) collide.

    The lock file lives in that ``build/`` folder (the tree's owner's, not a shared
    /tmp where another user could plant a symbolic link), falling back to the state
    folder when the tree is read-only; it is opened with ``O_NOFOLLOW``, 0600."""

    folder = root.resolve() / "build"
    try:
        folder.mkdir(exist_ok=True)
        probe = os.access(folder, os.W_OK)
    except OSError:
        probe = False
    if not probe:
        key = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]
        folder = state_dir() / "locks" / f"wheel-{key}"
        folder.mkdir(parents=True, exist_ok=True)
    with open_lock_file(folder / ".imagectl-wheel.lock") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def build_validator_wheel(ws: Workspace, dest: Path) -> str:
    """``pip wheel --no-deps`` of the workspace: the validator the image carries."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest)]
    if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
        cmd.append("--no-build-isolation")  # seconds instead of half a minute
    with _source_tree_lock(ws.root):
        proc = subprocess.run(
            [*cmd, str(ws.root)],
            capture_output=True,
            text=True,
            check=False,
        )
    wheels = sorted(dest.glob("imagectl-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise UserError(
            f"building the imagectl wheel for the validator role failed: {proc.stderr[-400:]}",
            hint=f"pip's own words are above; {ws.root} must be an imagectl source tree (its "
            "pyproject.toml) and this Python must have setuptools and wheel, or reach the "
            "package index to fetch them",
        )
    return str(wheels[-1])
