"""``require`` / ``require_root`` / ``require_tool`` / ``in_ci`` for tests/embedded, from the
shared helpers in tests/support.py."""

from __future__ import annotations

from tests.support import in_ci, require, require_root, require_tool

__all__ = ["in_ci", "require", "require_root", "require_tool"]
