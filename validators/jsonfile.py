"""Reading the validator's JSON documents (receipts, snapshots, expectations).

Every way a file can be unreadable (missing, not UTF-8, not JSON, truncated, larger or
nested deeper than any real one) becomes one UserError naming the file, the line where
JSON broke, and what to do: exit code 2 at the CLI, never a traceback. Size and nesting
are measured before the document is parsed (``imagectl.core.boundedjson.depth_of``, the one
bounded reader's measure).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.core.boundedjson import depth_of
from imagectl.core.errors import UserError

# Bounds for hostile documents: the largest real snapshot is a few MB, and no number we
# write has more than a few dozen digits (Python refuses past 4300 with a ValueError).
MAX_BYTES = 64 * 1024 * 1024
MAX_INT_DIGITS = 300
MAX_DEPTH = 64  # a receipt or snapshot nests about ten levels


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise ValueError(f"an integer {len(text)} digits long")
    return int(text)


STDIN = "standard input"


@dataclass
class _Stdin:
    """The standard input of this process, read once: its text, where its next document
    starts and how many were read. Tied to the stream it was read from, so a command run
    again in the same process (the tests' in-process CLI) reads its own input."""

    stream: Any
    text: str
    at: int = 0
    count: int = 0


_stdin: _Stdin | None = None


def read_json(path: Path, kind: str, hint: str) -> object:
    """The parsed JSON of ``path``, a ``kind`` document ("receipt", "snapshot", ...).

    ``-`` is the standard input, how a controller hands a host what it sends (the
    expectations, a snapshot to replay: one module run instead of a file copy each). It
    may hold several documents one after the other; each read takes the next, and the
    last read must leave nothing but whitespace."""
    if str(path) == "-":
        return _next_stdin_document(kind, hint)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read {kind} {path}: {exc.strerror}", hint=hint) from exc
    return _parse(_text(data, kind, str(path), hint), kind, str(path), hint)


def _text(data: bytes, kind: str, where: str, hint: str) -> str:
    if len(data) > MAX_BYTES:
        raise UserError(
            f"not a {kind}: larger than {MAX_BYTES // (1024 * 1024)} MiB", where=where, hint=hint
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"not a {kind}: the file is not UTF-8 text", where=where, hint=hint
        ) from exc


def _current_stdin() -> _Stdin | None:
    return _stdin if _stdin is not None and _stdin.stream is sys.stdin else None


def _next_stdin_document(kind: str, hint: str) -> object:
    global _stdin
    state = _current_stdin()
    if state is None:
        try:
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        except OSError as exc:
            raise UserError(f"cannot read {kind} from {STDIN}: {exc.strerror}", hint=hint) from exc
        state = _stdin = _Stdin(sys.stdin, _text(data, kind, STDIN, hint))
    start = len(state.text) - len(state.text[state.at :].lstrip())
    if start == len(state.text):
        raise UserError(
            f"no {kind} on {STDIN}: it held {state.count} document(s), and the {kind} "
            "was to be the next",
            where=STDIN,
            hint=hint,
        )
    decoder = json.JSONDecoder(parse_int=_bounded_int)
    _check_depth(state.text[start:].encode("utf-8", "surrogatepass"), kind, STDIN, hint)
    try:
        doc, end = decoder.raw_decode(state.text, start)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        # the document alone, to name its line and error as a file's would be
        _parse(state.text[start:], kind, STDIN, hint)
        raise UserError(f"not a {kind}: {exc}", where=STDIN, hint=hint) from exc
    state.at, state.count = end, state.count + 1
    return doc


def finish_stdin(hint: str) -> None:
    """Refuse anything but whitespace after the documents read from standard input (a
    controller that sent more than the command reads sent something wrong)."""
    state = _current_stdin()
    rest = state.text[state.at :].strip() if state is not None else ""
    if state is not None and rest:
        raise UserError(
            f"{STDIN} holds more after its {state.count} document(s): "
            f"{rest[:40]!r}{'...' if len(rest) > 40 else ''}",
            where=STDIN,
            hint=hint,
        )


def _check_depth(data: bytes, kind: str, where: str, hint: str) -> None:
    deepest = depth_of(data)
    if deepest > MAX_DEPTH:
        raise UserError(
            f"not a {kind}: JSON nested too deep ({deepest} levels, at most {MAX_DEPTH}); "
            f"the {kind} is corrupt or forged",
            where=where,
            hint=hint,
        )


def _parse(text: str, kind: str, where: str, hint: str) -> object:
    _check_depth(text.encode("utf-8", "surrogatepass"), kind, where, hint)
    try:
        return json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"line {exc.lineno}: not valid JSON ({exc.msg}); the {kind} is corrupt or truncated",
            where=where,
            hint=hint,
        ) from exc
    except RecursionError as exc:  # the C decoder stops at Python's recursion limit
        raise UserError(
            f"not a {kind}: JSON nested too deep; the {kind} is corrupt or forged",
            where=where,
            hint=hint,
        ) from exc
    except ValueError as exc:
        raise UserError(
            f"not a {kind}: {exc}; the {kind} is corrupt or forged", where=where, hint=hint
        ) from exc
