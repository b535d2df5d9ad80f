"""``--write``: put accepted pin changes into the stack file, keeping everything else.

The file is read with ruamel's round-trip loader (as ``stacks/loader.py`` does), only the
changed scalars are replaced (keeping their quoting), and the result is re-validated
against the schema before it replaces the original; comments, key order and layout stay.
"""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path

from ruamel.yaml import YAML

from imagectl.core.errors import UserError
from imagectl.drift.findings import PinChange
from imagectl.stacks.loader import load_stack


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def write_changes(path: Path, changes: list[PinChange]) -> list[PinChange]:
    """Write the changes without ``blocked_by``; returns those written."""
    todo = [c for c in changes if not c.blocked_by]
    if not todo:
        return []
    original = path.read_text(encoding="utf-8")
    yaml = _yaml()
    doc = yaml.load(original)
    for change in todo:
        node = doc
        for key in change.path[:-1]:
            node = node[key]
        old = node[change.path[-1]]
        if str(old) != change.current:
            raise UserError(
                f"{path}: {change.dotted} is '{old}', not '{change.current}' as when checked",
                hint="Re-run `imagectl drift --write` on the current file",
            )
        node[change.path[-1]] = _same_style(old, change.proposed)
    buf = StringIO()
    yaml.dump(doc, buf)
    text = buf.getvalue()
    tmp = path.with_suffix(path.suffix + ".drift-tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        # validate under the real name (load_stack checks name == file stem)
        os.replace(tmp, path)
        load_stack(path)
    except Exception:
        path.write_text(original, encoding="utf-8")
        raise
    return todo


def _same_style(old: object, new: str) -> str:
    """Keep the scalar's quoting: "580.95.05" stays double-quoted."""
    if isinstance(old, str) and type(old) is not str:  # ruamel's quoted scalar kinds
        return type(old)(new)
    return new
