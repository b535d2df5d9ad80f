"""Shared helpers of the validator tests (imported by name; conftest.py keeps fixtures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "snapshots"


def library_cases() -> dict[str, Any]:
    cases: dict[str, Any] = json.loads((SNAPSHOTS / "cases.json").read_text())
    return cases


def expect_file(base: str) -> Path:
    return SNAPSHOTS / "expect" / f"{base}.json"


class Run:
    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def imagectl_in_process(*args: str) -> Run:
    """The real CLI (``imagectl.cli.main``) in this process: faster than a subprocess."""
    import contextlib
    import io
    import os

    from imagectl.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(args))
    finally:
        os.chdir(old)
    return Run(int(rc), out.getvalue(), err.getvalue())
