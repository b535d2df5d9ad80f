"""Shared test helpers.

``require_tool(name)``: skip when an external tool is missing, but fail under CI=true
(the CI image must have every tool).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require(condition: bool, reason: str) -> None:
    """Skip locally / fail in CI when ``condition`` is false."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def require_tool(name: str) -> str:
    """Path of ``name`` (on PATH or next to the running Python), else skip / fail in CI."""
    venv_bin = Path(sys.executable).parent / name
    path = str(venv_bin) if venv_bin.exists() else shutil.which(name)
    require(path is not None, f"the external tool '{name}' is not installed")
    assert path is not None
    return path


def require_root() -> None:
    require(os.geteuid() == 0, "root rights are needed (debootstrap / chroot)")


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own IMAGECTL_STATE_DIR."""
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(path))
    return path
