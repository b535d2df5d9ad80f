"""qcow2 files: content addresses, throw-away overlays, raw round trips (no loop mounts)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from imagectl.embedded.procs import Children

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


def make_disk(
    children: Children, rootfs: Path, qcow2: Path, gib: int, *, log: Path | None = None
) -> Path:
    """A bootable qcow2 from a root folder with no loop mount: ``mkfs.ext4 -d`` then convert.

    The raw file is sparse and removed afterwards; the file system is labelled ``root``.
    """
    raw = qcow2.with_suffix(".raw")
    try:
        children.run(
            ["mkfs.ext4", "-q", "-F", "-L", "root", "-d", str(rootfs), str(raw), f"{gib}G"],
            name="mkfs.ext4",
            log=log,
        )
        children.run(
            ["qemu-img", "convert", "-O", "qcow2", str(raw), str(qcow2)],
            name="qemu-img convert",
            log=log,
        )
    finally:
        raw.unlink(missing_ok=True)
    return qcow2
