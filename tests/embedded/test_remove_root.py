"""``remove_root`` deletes a root file system even while a process that is dying still
writes into it (Ctrl-C during the chroot provisioning: the group is SIGKILLed, but a
member can write once more before it is gone; the e2e interrupt test saw the whole rootfs
stay behind under load)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from imagectl.embedded.chroot import remove_root

# Writes a new file into every folder of the tree, over and over, for about 0.6 s.
WRITER = """
import os, sys, time
root, end = sys.argv[1], time.monotonic() + 0.6
n = 0
while time.monotonic() < end:
    for folder, _dirs, _files in os.walk(root):
        n += 1
        try:
            with open(os.path.join(folder, f"late-{n}"), "w") as fh:
                fh.write("x")
        except OSError:
            pass
"""


def test_a_root_written_into_while_it_is_deleted_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    for i in range(40):
        folder = root / f"d{i}" / "sub"
        folder.mkdir(parents=True)
        for j in range(50):
            (folder / f"f{j}").write_text("x")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root)])
    try:
        time.sleep(0.1)  # writing before the deletion starts
        remove_root(root)
    finally:
        writer.wait(timeout=30)
    assert not root.exists()
