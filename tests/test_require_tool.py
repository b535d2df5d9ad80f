"""The shared ``require_tool`` helper: skip locally, fail under CI=true."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

MISSING = "imagectl-no-such-tool-4c1e"


def test_finds_a_tool_on_path(require_tool: Callable[..., str]) -> None:
    found = require_tool("sh")
    assert os.access(found, os.X_OK)


def test_finds_a_tool_in_extra_dirs(require_tool: Callable[..., str], tmp_path: Path) -> None:
    tool = tmp_path / MISSING
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert require_tool(MISSING, [str(tmp_path)]) == str(tool)


def test_missing_tool_skips_locally(
    require_tool: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require_tool(MISSING)


def test_missing_tool_fails_under_ci(
    require_tool: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING}.*CI=true"):
        require_tool(MISSING)
