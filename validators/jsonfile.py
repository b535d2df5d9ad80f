"""Reading the validator's JSON documents (receipts, snapshots, expectations).

Every way a file can be unreadable (missing, not UTF-8, not JSON, truncated) becomes one
UserError naming the file, the line where JSON broke, and what to do: exit code 2 at the
CLI, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from imagectl.errors import UserError


def read_json(path: Path, kind: str, hint: str) -> Any:
    """The parsed JSON of ``path``, a ``kind`` document ("receipt", "snapshot", ...)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {kind} {path}: {exc.strerror}", hint=hint) from exc
    except UnicodeDecodeError as exc:
        raise UserError(
            f"not a {kind}: the file is not UTF-8 text", where=str(path), hint=hint
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"line {exc.lineno}: not valid JSON ({exc.msg}); the {kind} is corrupt or truncated",
            where=str(path),
            hint=hint,
        ) from exc
