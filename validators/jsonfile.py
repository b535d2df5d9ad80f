"""Reading the validator's JSON documents (receipts, snapshots, expectations).

Every way a file can be unreadable (missing, not UTF-8, not JSON, truncated) becomes one
UserError naming the file, the line where JSON broke, and what to do: exit code 2 at the
CLI, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from imagectl.errors import UserError

# Bounds for hostile documents: the largest real snapshot is a few MB, and no number we
# write has more than a few dozen digits (Python refuses past 4300 with a ValueError).
MAX_BYTES = 64 * 1024 * 1024
MAX_INT_DIGITS = 300


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise ValueError(f"an integer {len(text)} digits long")
    return int(text)


def read_json(path: Path, kind: str, hint: str) -> Any:
    """The parsed JSON of ``path``, a ``kind`` document ("receipt", "snapshot", ...);
    ``-`` is the standard input (how a controller hands a host its expectations)."""
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with path.open("rb") as fh:
                data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read {kind} {path}: {exc.strerror}", hint=hint) from exc
    if len(data) > MAX_BYTES:
        raise UserError(
            f"not a {kind}: larger than {MAX_BYTES // (1024 * 1024)} MiB",
            where=str(path),
            hint=hint,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"not a {kind}: the file is not UTF-8 text", where=str(path), hint=hint
        ) from exc
    try:
        return json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"line {exc.lineno}: not valid JSON ({exc.msg}); the {kind} is corrupt or truncated",
            where=str(path),
            hint=hint,
        ) from exc
    except RecursionError as exc:  # the C decoder stops at Python's recursion limit
        raise UserError(
            f"not a {kind}: JSON nested too deep; the {kind} is corrupt or forged",
            where=str(path),
            hint=hint,
        ) from exc
    except ValueError as exc:
        raise UserError(
            f"not a {kind}: {exc}; the {kind} is corrupt or forged", where=str(path), hint=hint
        ) from exc
