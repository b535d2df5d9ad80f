"""JSON that a host wrote (the image's inventory and manifest, an SBOM's inventory in the
catalog), read within limits: a size, a nesting depth and a longest integer, each with
one clear ``UserError`` (exit 2) naming the document, never a ``RecursionError``
traceback, a hang or an exhausted memory. Counts and string lengths are the model's
(pydantic ``max_length``) once the shape is known.

The depth is measured before the document is parsed (a linear scan of its brackets
outside strings), so a 200,000-deep array is refused without the decoder recursing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from imagectl.core.errors import UserError

MAX_INT_DIGITS = 300  # no number imagectl writes has more than a few dozen digits
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)  # a string; a bracket


def depth_of(data: bytes) -> int:
    """The deepest nesting of arrays and objects in ``data`` (strings skipped)."""
    depth = deepest = 0
    for match in _TOKENS.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise ValueError(f"an integer {len(text)} digits long")
    return int(text)


def parse_bounded(
    data: bytes | str, *, kind: str, where: str, hint: str, max_bytes: int, max_depth: int
) -> Any:
    """``data`` parsed, or one UserError: larger than ``max_bytes``, not UTF-8, nested
    deeper than ``max_depth``, not JSON, or an absurd integer."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise UserError(
            f"the {kind} is larger than {max_bytes // (1024 * 1024)} MiB ({len(raw)} bytes)",
            where=where,
            hint=hint,
        )
    deepest = depth_of(raw)
    if deepest > max_depth:
        raise UserError(
            f"the {kind} is nested {deepest} levels deep; a {kind} has at most {max_depth}",
            where=where,
            hint=hint,
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"the {kind} is not UTF-8 text", where=where, hint=hint) from None
    try:
        return json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"the {kind} is not JSON (line {exc.lineno}: {exc.msg})", where=where, hint=hint
        ) from None
    except (ValueError, RecursionError) as exc:
        raise UserError(f"the {kind} is not valid: {exc}", where=where, hint=hint) from None
