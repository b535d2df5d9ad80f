"""Helpers shared by tests in every folder: import them as ``from tests.support import ...``
(``from conftest import ...`` is ambiguous: every folder's conftest.py is named conftest).

- ``require_tool(name, extra_dirs=())``: the path of an external program; skip the test
  when it is missing, fail it instead when ``CI=true``.
- ``require(condition, reason)`` / ``require_root()`` / ``require_url(url)``: the same rule
  for any condition, for root rights, and for a reachable URL.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


IN_CI = in_ci()


def require(condition: bool, reason: str) -> None:
    """Skip locally / fail in CI when ``condition`` is false."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def require_tool(name: str, extra_dirs: Iterable[str] = ()) -> str:
    """Path of the program ``name`` (in ``extra_dirs``, next to the running Python, or on
    PATH); skip if missing, fail if missing under CI=true."""
    for folder in (*extra_dirs, str(Path(sys.executable).parent)):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    message = f"external tool '{name}' is not installed"
    if in_ci():
        pytest.fail(f"{message} (CI=true: missing tools are failures)", pytrace=False)
    pytest.skip(message)


def require_root() -> None:
    require(os.geteuid() == 0, "root rights are needed (debootstrap / chroot)")


def _require_module(module: str, extra: str) -> None:
    try:
        __import__(module)
    except ImportError:
        message = f"Python module '{module}' is not installed (pip install 'imagectl[{extra}]')"
        if in_ci():
            pytest.fail(message, pytrace=False)
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
