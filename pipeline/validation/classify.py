"""Image-level or hardware: the split of validator checks, read from check_classes.yaml."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

CLASSES_FILE = Path(__file__).with_name("check_classes.yaml")


@functools.lru_cache(maxsize=1)
def _classes() -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]:
    from ruamel.yaml import YAML

    data = YAML(typ="safe").load(CLASSES_FILE.read_text(encoding="utf-8"))
    image = tuple(e["prefix"] for e in data["image_level"])
    hardware = tuple(e["prefix"] for e in data["hardware"])
    return image, hardware, frozenset(data.get("image_level_actions", []))


def is_image_level(check: dict[str, Any]) -> bool:
    image, _, actions = _classes()
    if str(check.get("action", "")) in actions:
        return True
    return str(check.get("id", "")).startswith(image)


def failed(check: dict[str, Any]) -> bool:
    """fail and error both count against the host (an error is never a pass)."""
    return check.get("outcome") in ("fail", "error")
