"""Image-level or hardware: the split of validator checks, read from check_classes.yaml."""

from __future__ import annotations

import functools
from pathlib import Path

from imagectl.core.yamlfast import loads as load_yaml
from imagectl.validators.results import CheckResult

CLASSES_FILE = Path(__file__).with_name("check_classes.yaml")


@functools.lru_cache(maxsize=1)
def _classes() -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]:
    data = load_yaml(CLASSES_FILE.read_text(encoding="utf-8"))
    image = tuple(e["prefix"] for e in data["image_level"])
    hardware = tuple(e["prefix"] for e in data["hardware"])
    return image, hardware, frozenset(data.get("image_level_actions", []))


def is_image_level(check: CheckResult) -> bool:
    image, _, actions = _classes()
    if check.action.value in actions:
        return True
    return check.id.startswith(image)
