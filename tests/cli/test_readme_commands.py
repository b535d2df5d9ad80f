"""The docs' command table (docs/commands.md) lists every command of the registry
(``imagectl.cli.COMMANDS``), and names none that is not one; each row's command parses with
the real command line. Before, ``bundle``, ``rollout``, ``watch``, ``run`` and ``collectives`` had
no row."""

from __future__ import annotations

import re

from imagectl.cli import COMMANDS
from tests.cli.hints import REPO

HEADER = "| command | what it does |"


def _first_cells() -> list[str]:
    lines = (REPO / "docs" / "commands.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER)
    cells = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells.append(re.split(r"(?<!\\)\|", line)[1])
    return cells


def named(cell: str) -> set[str]:
    """The commands a first cell names: each backticked segment's command word."""
    found = set()
    for segment in re.findall(r"`([^`]+)`", cell):
        words = segment.removeprefix("imagectl ").split()
        if words:
            found.add(words[0])
    return found


def test_the_command_table_lists_every_command() -> None:
    cells = _first_cells()
    assert len(cells) > 15
    listed = set().union(*map(named, cells))
    assert sorted(set(COMMANDS) - listed) == [], "commands without a row"
    assert sorted(listed - set(COMMANDS)) == [], "rows naming no command"


def test_named_finds_each_form() -> None:
    assert named("`imagectl rollback --stack S` / `deprecate` / `block IMAGE --reason`") == {
        "rollback", "deprecate", "block",
    }  # fmt: skip
