"""A full disk leaves nothing half-written: every writer (validate -o / --junit, snapshot
-o, plan --out, the receipt writer, the local registry) fails with exit 2 naming the file,
the file it would have replaced is unchanged, and no empty or ``.tmp`` file is left.

The disk is a real 64 KiB tmpfs, filled to the last page. Mounting needs root (CI runs as
root); elsewhere the test skips, and under CI=true it fails instead.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO, require

SNAPSHOT = REPO / "tests" / "snapshots" / "healthy" / "h100-sxm-8x.json"
OLD = "the previous version\n"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    require(proc.returncode == 0, f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        (mnt / "out").mkdir()
        (mnt / "out" / "receipt.json").write_text(OLD)
        (mnt / "out" / "junit.xml").write_text(OLD)
        (mnt / "out" / "local.local.ansible.json").write_text(OLD)
        with open(mnt / "filler", "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:  # to the last page
                fh.write(b"\0" * 4096)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _left(mnt: Path) -> list[str]:
    """Every file on the disk but the filler and the registry's (empty) region lock, with a
    mark for empty or temporary ones."""
    out = []
    for path in sorted(mnt.rglob("*")):
        if path.is_file() and path.name not in ("filler", ".lock"):
            rel = str(path.relative_to(mnt))
            bad = path.stat().st_size == 0 or path.name.endswith(".tmp")
            out.append(f"{rel} (EMPTY/TMP)" if bad else rel)
    return out


BEFORE = ["out/junit.xml", "out/local.local.ansible.json", "out/receipt.json"]


def _unchanged(mnt: Path) -> None:
    assert _left(mnt) == BEFORE
    for name in BEFORE:
        assert (mnt / name).read_text() == OLD


def test_validate_receipt_and_junit(full_disk: Path, hostile) -> None:
    out = full_disk / "out"
    for flag, name in (("-o", "receipt.json"), ("--junit", "junit.xml")):
        res = hostile(
            "validate", "--replay", str(SNAPSHOT), "--no-hygiene", flag, str(out / name),
            code=2, timeout=60,
        )  # fmt: skip
        assert f"cannot write {out / name}" in res.text and "No space left" in res.text
        _unchanged(full_disk)


def test_snapshot_and_plan(full_disk: Path, hostile) -> None:
    out = full_disk / "out"
    res = hostile("snapshot", "-o", str(out / "snapshot.json"), timeout=60)
    assert f"cannot write {out / 'snapshot.json'}" in res.text
    _unchanged(full_disk)
    res = hostile("--root", str(REPO), "plan", "--stack", "local", "--out", str(out))
    assert f"cannot write {out}" in res.text and "No space left" in res.text
    _unchanged(full_disk)


def test_local_registry_copy(full_disk: Path, tmp_path: Path) -> None:
    from imagectl.clouds.local.provider import LocalProvider
    from imagectl.clouds.local.spec import LocalOptions
    from imagectl.core.errors import UserError

    disk = tmp_path / "image.qcow2"
    disk.write_bytes(os.urandom(256 * 1024))  # larger than the whole small disk
    registry = LocalProvider(LocalOptions(root=full_disk / "registry"))
    with pytest.raises(UserError) as err:
        registry.import_image(disk, region="local-a", stack="local", digest="sha256:00")
    assert "No space left" in err.value.render()
    _unchanged(full_disk)
    assert registry.find_images(region="local-a") == []
