"""``require_tool`` / ``require_root`` of tests/conftest.py, imported by file path.

Several folders under tests/ have a conftest.py, so ``from conftest import ...`` picks
whichever was imported last; loading the root one by path is unambiguous.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "imagectl_tests_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_root = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _root
_spec.loader.exec_module(_root)

require = _root.require
require_root = _root.require_root
require_tool = _root.require_tool
in_ci = _root.in_ci
