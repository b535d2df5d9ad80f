"""Files written safely: whole or not at all, private when they hold secrets, locks that
follow no symlink.

``atomic_write`` writes a temporary file in the destination's folder, flushes it to disk
and renames it over the destination: a reader sees the old file or the new one, never
half of one. On any failure (a full disk, Ctrl-C, a bug) the temporary file is removed
and the destination is left as it was; an ``OSError`` becomes a ``UserError`` naming the
file (exit 2, no traceback).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError

TMP_SUFFIX = ".tmp"


def atomic_write(path: Path | str, data: str | bytes, *, mode: int = 0o644) -> Path:
    """Replace ``path`` with ``data`` atomically; the file gets permission bits ``mode``."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    except OSError as exc:
        raise _user_error(path, exc) from exc
    tmp = Path(tmp_name)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise _user_error(path, exc) from exc
        raise
    return path


def atomic_write_json(
    path: Path | str, payload: object, *, mode: int = 0o644, **dumps: Any
) -> Path:
    """``atomic_write`` of ``json.dumps(payload, **dumps)`` plus a final newline."""
    return atomic_write(path, json.dumps(payload, **dumps) + "\n", mode=mode)


def _user_error(path: Path, exc: OSError) -> UserError:
    return UserError(
        f"cannot write {path}: {exc.strerror or exc}",
        hint="Check that the folder exists, is writable and has free space; nothing was "
        "written there",
    )


def private_dir(path: Path | str) -> Path:
    """A folder only its owner can read (0700), created when missing."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


@contextlib.contextmanager
def open_lock_file(path: Path | str) -> Iterator[int]:
    """A lock file's descriptor, opened 0600 without following a symlink at ``path``
    (``O_NOFOLLOW``): a link planted there makes the open fail instead of truncating or
    writing through to another file."""
    path = Path(path)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise UserError(
            f"cannot open the lock file {path}: {exc.strerror or exc}",
            hint="The lock must be a plain file (not a symbolic link) in a folder you own; "
            "remove what is there",
        ) from exc
    try:
        yield fd
    finally:
        os.close(fd)


def sha256_file(path: Path | str) -> str:
    """The hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
