"""Prose that names commands, wrapped for a terminal so that every command stays whole.

A hint names the command to type in backticks (`` `imagectl attest --new-key
--save-trust` ``). Wrapped like any text, a line break lands inside it and the paste runs
another command (``imagectl attest --new-key`` without ``--save-trust``). ``wrap`` breaks
lines only between words outside backticks: a command (with the punctuation glued to it)
is one unit, moved whole to the next line, or put on a line of its own, unbroken, where
it is wider than the terminal (the terminal folds it visually; a copy is still one line).

Nothing here imports rich or imagectl (the validator's host side uses it too).
"""

from __future__ import annotations

import re

# a backticked command with what is glued to it ("(`imagectl lint`)."), or a word
_UNIT = re.compile(r"[^\s`]*`[^`]*`[^\s`]*|[^\s`]*`[^\s]*|\S+")


def units(line: str) -> list[str]:
    """The words of one line, each backticked command (and its glued punctuation) one."""
    return _UNIT.findall(line)


def wrap(text: str, width: int, *, first: int = 0) -> list[str]:
    """``text`` as lines of at most ``width`` columns (the first ``first`` columns
    narrower, for a prefix such as ``error: ``), broken only between units; a unit wider
    than a line stands alone on its line. The text's own newlines are kept."""
    width = max(width, 20)
    out: list[str] = []
    for para in text.split("\n"):
        room = width - first if not out else width
        line = ""
        for unit in units(para):
            if not line:
                line = unit
            elif len(line) + 1 + len(unit) <= room:
                line += " " + unit
            else:
                out.append(line)
                room = width
                line = unit
        out.append(line)
    return out
