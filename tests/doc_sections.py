"""A section of the user documentation found by its heading: README.md first, else any
docs/*.md (the README is being split into a short README and a docs/ site; a section that
moves keeps being found), and the commands it tells a person to type."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def section(heading: str, root: Path = REPO) -> tuple[Path, str]:
    """The file and text of the first section whose heading starts with ``heading``
    (case-insensitive), up to the next heading of its level or above; fenced code is not
    read for headings (a ``# comment`` in a shell block is none)."""
    files = [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]
    for path in (p for p in files if p.is_file()):
        lines, found, level, fenced = path.read_text().splitlines(), None, 0, False
        for i, line in enumerate(lines):
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            m = None if fenced else _HEADING.match(line)
            if m is None:
                continue
            if found is not None and len(m.group(1)) <= level:
                return path, "\n".join(lines[found:i])
            if found is None and m.group(2).lower().startswith(heading.lower()):
                found, level = i, len(m.group(1))
        if found is not None:
            return path, "\n".join(lines[found:])
    raise LookupError(f"no section headed {heading!r} in README.md or docs/*.md")


def typed_commands(text: str) -> list[str]:
    """Every ``imagectl ...`` command in backticks (a span may be folded over two lines) or
    on a line of a fenced block, in the order the text gives them, on one line each."""
    out: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in [*text.splitlines(), "```"]:  # the closing fence flushes the last prose
        if line.lstrip().startswith(("```", "~~~")):
            if not fenced:
                joined = " ".join(" ".join(prose).split())
                out += re.findall(r"`((?:\S*/)?imagectl\s[^`]*)`", joined)
                prose = []
            fenced = not fenced
        elif fenced:
            cmd = line.strip().removeprefix("$ ").split(" #")[0].strip()
            if re.match(r"(\S*/)?imagectl\s", cmd):
                out.append(" ".join(cmd.split()))
        else:
            prose.append(line)
    return out
