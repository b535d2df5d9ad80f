"""Helpers shared by the drift tests (edit a stack copy, read the JSON report)."""

from __future__ import annotations

import json
from pathlib import Path


def edit(ws: Path, stack: str, old: str, new: str) -> Path:
    path = ws / "images" / "stacks" / f"{stack}.yaml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


def stack_report(result, stack: str) -> dict:  # type: ignore[no-untyped-def]
    doc = json.loads(result.out)
    return next(s for s in doc["stacks"] if s["stack"] == stack)


def kinds(entry: dict) -> dict[str, dict]:
    return {f["kind"]: f for f in entry["findings"]}


def proposals(entry: dict) -> dict[str, dict]:
    return {p["pin"]: p for p in entry["proposals"]}
