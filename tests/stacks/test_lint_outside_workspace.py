"""``imagectl lint`` outside a workspace says so: with no ``--root``, no
``IMAGECTL_ROOT`` and no ``images/stacks`` in the current folder or above it, it lints the
stacks bundled with the installed package, and tells the user, on stderr and in the JSON,
instead of reporting them as if they were the user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import flat

REPO = Path(__file__).resolve().parents[2]
CODE = "import sys; from imagectl.cli import main; sys.exit(main(sys.argv[1:]))"


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "IMAGECTL_ROOT"}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-c", CODE, "lint", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_lint_outside_a_workspace_says_so(tmp_path: Path) -> None:
    proc = _lint(tmp_path)
    assert "no workspace" in flat(proc.stderr), proc.stderr
    assert "bundled with the installed imagectl" in flat(proc.stderr)
    assert str(tmp_path) in proc.stderr  # where it looked
    assert "--root" in flat(proc.stderr)  # what to do

    as_json = _lint(tmp_path, "--json")
    body = json.loads(as_json.stdout)
    assert body["workspace"]["bundled"] is True
    assert "no workspace" in flat(as_json.stderr)


def test_lint_in_a_checkout_says_nothing_of_the_kind() -> None:
    proc = _lint(REPO / "images", "--json")
    body = json.loads(proc.stdout)
    assert body["workspace"] == {"root": str(REPO), "bundled": False}
    assert "no workspace" not in flat(proc.stderr)
