"""A long ``TMPDIR`` does not break the programs imagectl starts that make unix sockets.

A unix socket's path must fit in ``sun_path`` (108 bytes with its NUL: unix(7)). Packer
1.6 serves its builders and provisioners on sockets in ``$TMPDIR``; under a 106-character
``TMPDIR`` (a fresh machine's ``CI=true TMPDIR=... bash .ci/run``) every plugin failed with
"listen unix ...: bind: invalid argument" and the local build ended in "PACKER CRASH".
``imagectl.core.sockets`` gives such a child a ``TMPDIR`` its sockets fit under; the saved
boot's QEMU sockets use the same rule.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from imagectl.clouds.local.saved_boot import socket_dir
from imagectl.core.sockets import SUN_PATH_MAX, child_env, fits, socket_base
from imagectl.packer.runner import PLUGIN_SOCKET_ROOM, run
from tests.support import flat, require_tool

NULL_BUILD = """\
source "null" "long" {
  communicator = "none"
}
build {
  sources = ["source.null.long"]
}
"""


@pytest.fixture
def long_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 120-byte TMPDIR, for this process (tempfile's cache too) and its children."""
    folder = tmp_path / "t"
    folder = Path(str(folder) + "x" * max(0, 120 - len(str(folder))))
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert tempfile.gettempdir() == str(folder)
    return folder


def _binds(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.bind(str(path))
        except OSError:
            return False
    path.unlink()
    return True


def test_the_kernel_limit_is_the_one_the_code_uses() -> None:
    """``fits`` agrees with the kernel at the boundary: 107 bytes bind, 108 do not. The
    folder is made where sockets fit (``socket_base``), since ``tmp_path`` under a long
    ``TMPDIR`` leaves no room for a socket name at all."""
    with tempfile.TemporaryDirectory(dir=socket_base(PLUGIN_SOCKET_ROOM)) as made:
        folder = Path(made)
        room = SUN_PATH_MAX - len(os.fsencode(str(folder))) - 1
        assert room > 2, f"{folder} leaves no room for a socket name"
        at_limit, over = folder / ("a" * room), folder / ("b" * (room + 1))
        assert fits(at_limit) and _binds(at_limit)
        assert not fits(over) and not _binds(over)


def test_sockets_go_where_they_fit(long_tmpdir: Path) -> None:
    base = socket_base(PLUGIN_SOCKET_ROOM)
    assert base != str(long_tmpdir) and _binds(Path(base) / f"packer-plugin{os.getpid():010d}")
    assert child_env(PLUGIN_SOCKET_ROOM)["TMPDIR"] == base
    # a TMPDIR with room keeps its place
    assert child_env(PLUGIN_SOCKET_ROOM, {"TMPDIR": "/tmp"})["TMPDIR"] == "/tmp"
    # the saved boot's control sockets
    assert fits(socket_dir(long_tmpdir / "vm") / "serial.sock")


def test_packer_builds_under_a_long_tmpdir(long_tmpdir: Path, tmp_path: Path) -> None:
    packer = require_tool("packer")
    template = tmp_path / "null.pkr.hcl"
    template.write_text(NULL_BUILD)
    done = run([packer, "-machine-readable", "build", str(template)], cwd=tmp_path, check=False)
    output = flat(" ".join(done.other_output + [e.text for e in done.events]))
    assert done.returncode == 0, output
    assert "bind: invalid argument" not in output and "PACKER CRASH" not in output
