"""Prose that names commands, wrapped for a terminal so that every command stays whole.

A hint names the command to type in backticks (`` `imagectl attest --new-key
--save-trust` ``). Wrapped like any text, a line break lands inside it and the paste runs
another command (``imagectl attest --new-key`` without ``--save-trust``). ``wrap`` breaks
lines only between words outside backticks: a command (with the punctuation glued to it)
is one unit, moved whole to the next line, or put on a line of its own, unbroken, where
it is wider than the terminal (the terminal folds it visually; a copy is still one line).

``say`` prints such prose on a rich console, ``command_line`` a command of its own (an
install line, a resume command). Both sides use them (the validator's host side too).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.text import Text

from imagectl.core.safetext import plain

if TYPE_CHECKING:
    from rich.console import Console

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


def say(
    out: Console,
    text: str,
    *,
    prefix: str = "",
    prefix_style: str = "",
    style: str = "",
    indent: str = "",
) -> None:
    """Print ``text`` (never parsed as markup) after ``prefix``, wrapped at the console's
    width with every backticked command whole (``imagectl.core.commandtext``; lines after
    the first start with ``indent``): rich's own wrapping would break a line inside a
    command, and the paste would run another one."""
    lines = wrap(plain(text), out.width - len(indent), first=len(prefix) - len(indent))
    shown = Text(prefix, style=prefix_style)
    shown.append(("\n" + indent).join(lines), style=style)
    out.print(shown, soft_wrap=True)


def command_line(out: Console, label: str, command: str) -> None:
    """``label`` and the ``command`` a person copies (an install line, a resume command)
    on one line that rich never breaks, free of markup: the terminal folds it where it
    is wider, and a copy of it is still one command."""
    out.print(f"{plain(label)} {plain(command)}", markup=False, highlight=False, soft_wrap=True)
