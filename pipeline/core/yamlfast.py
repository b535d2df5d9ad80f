"""Fast read-only YAML for data catalogs (libyaml's C loader when present).

Stack files use ruamel's round-trip loader instead (line numbers, comment-preserving
rewrites); catalogs and rule files only need to be read, quickly. ruamel's pure-Python
safe loader took 0.6 s of the validator's 0.9 s of CPU (the XID catalog and the DCGM
table alone), in every boot check and every validation; libyaml reads them in a few
milliseconds. The shipped catalogs read the same through either loader
(tests/test_yamlfast.py: YAML 1.1 and 1.2 differ on yes/no, octal and sexagesimal).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from imagectl.core.errors import UserError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def loads(text: str) -> Any:
    """``text`` parsed (yaml.YAMLError, with its line, when it is not YAML)."""
    return yaml.load(text, Loader=_Loader)


def load_data(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return loads(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"malformed YAML: {exc}", where=where) from exc
