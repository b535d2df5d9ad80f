"""Helpers for validation-run tests: snapshot choices and the test-mode inventory override."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[2]
SNAPSHOTS = REPO / "tests" / "snapshots"
HEALTHY = SNAPSHOTS / "healthy" / "h100-sxm-8x.json"
HARDWARE_FAULT = SNAPSHOTS / "faults" / "h100-sxm-8x--xid79-fallen-off-bus.json"
IMAGE_FAULT = SNAPSHOTS / "faults" / "h100-sxm-8x--wrong-driver-version.json"


def write_override(
    tmp_path: Path, slots: list[dict[str, Any] | Path], default: Path = HEALTHY
) -> Path:
    """Test mode: every host is this machine (ansible_connection=local) replaying a
    snapshot; slot N is the N-th launched host (replacements continue the count)."""
    root = tmp_path / "empty-root"
    root.mkdir(exist_ok=True)
    data = {
        "all": {"ansible_connection": "local", "validate_hygiene_root": str(root)},
        "slots": [
            {"validate_snapshot": str(s)} if isinstance(s, Path) else s for s in slots
        ],
        "default_slot": {"validate_snapshot": str(default)},
    }
    path = tmp_path / "inventory-override.yaml"
    with path.open("w") as fh:
        YAML().dump(data, fh)
    return path
