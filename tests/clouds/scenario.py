"""Helpers for validation-run tests: snapshot choices and the test-mode inventory override."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[2]
SNAPSHOTS = REPO / "tests" / "snapshots"
HEALTHY = SNAPSHOTS / "healthy" / "h100-sxm-8x.json"
HARDWARE_FAULT = SNAPSHOTS / "faults" / "h100-sxm-8x--xid79-fallen-off-bus.json"
IMAGE_FAULT = SNAPSHOTS / "faults" / "h100-sxm-8x--wrong-driver-version.json"


def stand_in_validator(path: Path, *lines: str) -> Path:
    """A validator for an inventory override's ``validate_imagectl``: a shell script that
    reads its standard input first, as the validator does (the snapshot and the
    expectations: one that exits before Ansible has written them is EPIPE, rc 32, a
    crash of its own), then runs ``lines``."""
    path.write_text("\n".join(["#!/bin/sh", "cat > /dev/null", *lines]) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def snapshot_on(cloud: str, snapshot: Path, folder: Path) -> Path:
    """The library's snapshots were captured on AWS hosts; the same host booted on
    ``cloud`` runs that cloud's pinned kernel (images/stacks/h100-training.yaml)."""
    if cloud == "aws" or not snapshot.is_relative_to(SNAPSHOTS):
        return snapshot
    from imagectl.paths import find_workspace
    from imagectl.stacks import load_resolved

    _, resolved = load_resolved(find_workspace().images, "h100-training")
    data = json.loads(snapshot.read_text())
    data["host"]["kernel_release"] = getattr(resolved.stack.clouds, cloud).kernel
    data["host"]["cloud_image"]["cloud"] = cloud
    out = folder / f"{cloud}--{snapshot.name}"
    out.write_text(json.dumps(data))
    return out


def write_override(
    tmp_path: Path,
    slots: list[dict[str, Any] | Path],
    default: Path = HEALTHY,
    *,
    cloud: str = "aws",
) -> Path:
    """Test mode: every host is this machine (ansible_connection=local) replaying a
    snapshot; slot N is the N-th launched host (replacements continue the count)."""
    root = tmp_path / "empty-root"
    root.mkdir(exist_ok=True)

    def host(slot: dict[str, Any] | Path) -> dict[str, Any]:
        entry = {"validate_snapshot": slot} if isinstance(slot, Path) else dict(slot)
        entry["validate_snapshot"] = str(
            snapshot_on(cloud, Path(entry["validate_snapshot"]), tmp_path)
        )
        return entry

    data = {
        "all": {"ansible_connection": "local", "validate_hygiene_root": str(root)},
        "slots": [host(s) for s in slots],
        "default_slot": host(default),
    }
    path = tmp_path / "inventory-override.yaml"
    with path.open("w") as fh:
        YAML().dump(data, fh)
    return path
