"""Fixtures for the validator tests: the snapshot library and a clean state directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "snapshots"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "state"))


def library_cases() -> dict[str, Any]:
    cases: dict[str, Any] = json.loads((SNAPSHOTS / "cases.json").read_text())
    return cases


def expect_file(base: str) -> Path:
    return SNAPSHOTS / "expect" / f"{base}.json"
