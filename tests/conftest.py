"""Shared test helpers: run the real CLI in-process, require external tools."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() == "true"


def require_tool(name: str) -> str:
    """Path of an external tool; skip when missing locally, fail when CI=true."""
    path = shutil.which(name)
    if path:
        return path
    message = f"external tool '{name}' is not installed"
    if IN_CI:
        pytest.fail(f"{message} (CI=true: a missing tool is a failure)")
    pytest.skip(message)


def require_url(url: str, timeout: float = 20.0) -> None:
    """Skip when ``url`` cannot be fetched locally; fail when CI=true (CI reaches it)."""
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return
    except Exception as exc:  # any failure means: not reachable from here
        message = f"{url} is not reachable: {exc}"
    if IN_CI:
        pytest.fail(f"{message} (CI=true: the archive must be reachable)")
    pytest.skip(message)


@pytest.fixture
def reachable():
    """``reachable(url)``: skip (locally) or fail (CI=true) when ``url`` cannot be fetched."""
    return require_url


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test gets its own state dir (catalog, plan files): nothing leaks into ~."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(state))
    monkeypatch.setenv("COLUMNS", "200")
    return state


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``imagectl ARGS`` in-process through the real entry point."""
    from imagectl.cli import main

    def run(*args: str) -> CliResult:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code=code, out=captured.out, err=captured.err)

    return run


@pytest.fixture
def workspace_copy(tmp_path: Path) -> Path:
    """A writable copy of the repository's images/ and playbooks/ to break on purpose."""
    root = tmp_path / "ws"
    shutil.copytree(REPO / "images", root / "images")
    if (REPO / "playbooks").is_dir():
        shutil.copytree(REPO / "playbooks", root / "playbooks")
    return root
