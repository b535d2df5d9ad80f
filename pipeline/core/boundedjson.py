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
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # a bracket as its step + 1


def depth_of(data: bytes) -> int:
    """The deepest nesting of arrays and objects in ``data`` (strings skipped): the
    strings removed and the brackets kept in one pass each of C code, then the running
    depth (a 10 MB answer of a Prometheus in a few tens of milliseconds)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET).translate(_STEP)
    depth = deepest = 0
    for step in brackets:
        depth += step - 1
        if depth > deepest:
            deepest = depth
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
