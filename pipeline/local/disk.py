"""qcow2 files: content addresses, throw-away overlays, raw round trips (no loop mounts)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from imagectl.local.procs import Children

CHUNK = 4 * 1024 * 1024


def content_id(path: Path) -> str:
    """``sha256:<hex>`` of the file's bytes: the image's id in the local registry."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def overlay(children: Children, backing: Path, path: Path) -> Path:
    """A qcow2 overlay on ``backing``: the VM writes there, the image stays untouched."""
    path.unlink(missing_ok=True)
    children.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(backing.resolve()),
         str(path)],
        name="qemu-img create",
    )  # fmt: skip
    return path


def to_raw(children: Children, qcow2: Path, raw: Path) -> Path:
    children.run(
        ["qemu-img", "convert", "-O", "raw", str(qcow2), str(raw)], name="qemu-img convert"
    )
    return raw


def to_qcow2(children: Children, raw: Path, qcow2: Path) -> Path:
    children.run(
        ["qemu-img", "convert", "-O", "qcow2", str(raw), str(qcow2)], name="qemu-img convert"
    )
    return qcow2
