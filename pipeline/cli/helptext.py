"""``--help`` as the registry serves it: the command's exit codes at its end
(``imagectl.cli.exit_codes``), and every backticked command in its text kept whole.

click wraps help text with ``textwrap``, which breaks lines at spaces and after hyphens:
``imagectl verify-node`` came out as ``imagectl verify-`` and ``node`` on the next line.
Inside backticks, spaces become no-break spaces and hyphens non-breaking hyphens while
click wraps (``textwrap`` breaks at neither), and are put back in what it wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import click

from imagectl.cli.exit_codes import with_exit_codes

_KEEP = str.maketrans({" ": "\u00a0", "-": "\u2011"})
_BACK = str.maketrans({"\u00a0": " ", "\u2011": "-"})
_TICKED = re.compile(r"`(?:[^`\n]|\n(?!\s*\n))+`")  # within a paragraph


def _whole(text: str) -> str:
    return _TICKED.sub(lambda m: " ".join(m.group(0).split()).translate(_KEEP), text)


_GLUED = re.compile(r"[^\s`]*`[^`]+`[^\s`]*")  # with the punctuation glued to it: one word


def _longest(text: str) -> int:
    """The widest backticked command in ``text``, as the word textwrap sees."""
    return max((len(m.group(0)) for m in _GLUED.finditer(_whole(text))), default=0)


class WholeCommandsFormatter(click.HelpFormatter):
    """click's help formatter, never breaking a line inside backticks (a command wider
    than the text's column widens that paragraph: the terminal folds it, a copy is one
    line; ``textwrap`` would cut it mid-word)."""

    def write_text(self, text: str) -> None:
        width = self.width
        self.width = max(width, _longest(text) + self.current_indent + 2)
        try:
            super().write_text(_whole(text))
        finally:
            self.width = width

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        rows = list(rows)
        width = self.width
        first = min(max((len(a) for a, _ in rows), default=0), col_max) + col_spacing
        need = max((_longest(b) for _, b in rows), default=0) + first + self.current_indent
        self.width = max(width, need + 2)
        try:
            super().write_dl([(a, _whole(b)) for a, b in rows], col_max, col_spacing)
        finally:
            self.width = width

    def getvalue(self) -> str:
        return super().getvalue().translate(_BACK)


class HelpContext(click.Context):
    formatter_class = WholeCommandsFormatter


def with_help(name: str, cmd: click.Command) -> click.Command:
    """``cmd`` (and a group's sub-commands) with the help formatter and exit codes."""
    with_exit_codes(name, cmd)
    cmd.context_class = HelpContext
    if isinstance(cmd, click.Group):
        for child in cmd.commands.values():
            child.context_class = HelpContext
    return cmd
