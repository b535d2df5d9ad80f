"""Where a program may make its unix sockets.

A unix socket's path must fit ``sockaddr_un.sun_path``: 108 bytes on Linux, its NUL
included (unix(7)). Programs put theirs in the temporary directory (Packer 1.6's plugins:
``$TMPDIR/packer-plugin<digits>``; QEMU's monitor and serial sockets where imagectl names
them), so a long ``TMPDIR`` (a CI runner's, a test session's) makes each of them fail to
bind ("bind: invalid argument": Packer then crashes loading its builders). ``socket_base``
is the folder to use: the temporary directory when a ``room``-byte name fits under it, else
``/tmp`` (FHS: present and sticky on every Linux this runs on); ``child_env`` is the
environment for a child that makes sockets in its ``TMPDIR``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

SUN_PATH_MAX = 107  # bytes of a socket's path: sun_path's 108 less its NUL (unix(7))
FALLBACK = "/tmp"


def fits(path: str | os.PathLike[str]) -> bool:
    """Whether a unix socket can be bound at ``path``."""
    return len(os.fsencode(os.fspath(path))) <= SUN_PATH_MAX


def socket_base(room: int) -> str:
    """A folder under which a socket name of ``room`` bytes fits (see the module)."""
    base = tempfile.gettempdir()
    if fits(os.path.join(base, "x" * room)):
        return base
    return FALLBACK


def child_env(room: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` with ``extra``, and ``TMPDIR`` moved to ``socket_base(room)`` where the
    inherited one is too long for the child's sockets (nothing else of it changes)."""
    env = {**os.environ, **(extra or {})}
    inherited = env.get("TMPDIR") or tempfile.gettempdir()
    if not fits(os.path.join(inherited, "x" * room)):
        env["TMPDIR"] = FALLBACK
    return env
