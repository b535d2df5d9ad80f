"""Fixtures for drift tests: NVIDIA index fixtures, a workspace copy, stack edits."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-index"


@pytest.fixture
def nvidia_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the drift check at the fixture copies of NVIDIA's indexes."""
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", FIXTURES.as_uri())
    return FIXTURES
