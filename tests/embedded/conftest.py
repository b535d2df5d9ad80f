"""Fixtures shared by the local end-to-end tests: one state folder per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from needs import require_root, require_tool

E2E_TOOLS = ("debootstrap", "qemu-system-x86_64", "qemu-img", "packer", "ansible-playbook",
             "mkfs.ext4", "debugfs", "ssh", "scp", "ssh-keygen")  # fmt: skip


@pytest.fixture(scope="session")
def e2e_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """State folder (base image, candidates, catalog, registry) for the e2e tests.

    ``IMAGECTL_E2E_STATE_DIR`` keeps it between sessions (the base image is then built
    once); otherwise a fresh temporary folder: a cold run.
    """
    require_root()
    for tool in E2E_TOOLS:
        require_tool(tool)
    kept = os.environ.get("IMAGECTL_E2E_STATE_DIR")
    path = Path(kept) if kept else tmp_path_factory.mktemp("e2e-state")
    path.mkdir(parents=True, exist_ok=True)
    return path
