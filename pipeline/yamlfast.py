"""Fast read-only YAML for data catalogs (libyaml's C loader when present).

Stack files use ruamel's round-trip loader instead (line numbers, comment-preserving
rewrites); catalogs and rule files only need to be read, quickly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from imagectl.errors import UserError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_data(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"malformed YAML: {exc}", where=where) from exc
