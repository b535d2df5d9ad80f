"""The README's table of environment variables lists exactly the ``IMAGECTL_*`` variables
the code reads (issue 32 item 4): a variable added to the code without a row, or a row left
for a variable the code no longer reads, fails here, so the table cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAME = re.compile(r"\bIMAGECTL_[A-Z0-9_]*[A-Z0-9]\b")
SOURCES = ("pipeline", "validators", "playbooks")
SUFFIXES = {".py", ".yml", ".yaml", ".j2", ".hcl", ".sh"}
# click's completion variable: click reads it, and the README documents it in its section
NOT_SETTINGS = {"IMAGECTL_COMPLETE"}


def in_code() -> set[str]:
    found: set[str] = set()
    for folder in SOURCES:
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                found |= set(NAME.findall(path.read_text(errors="replace")))
    return found - NOT_SETTINGS


def in_readme_table() -> dict[str, list[str]]:
    text = (REPO / "README.md").read_text()
    section = text.split("### Environment variables", 1)[1].split("\n### ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `(IMAGECTL_[A-Z0-9_]+)` \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
    return rows


def test_every_variable_the_code_reads_has_a_row_and_no_other() -> None:
    code, table = in_code(), in_readme_table()
    assert code, "no IMAGECTL_ variable found in the code"
    assert sorted(code - set(table)) == [], "in the code, not in the README table"
    assert sorted(set(table) - code) == [], "in the README table, not in the code"


def test_every_row_says_what_it_sets_and_its_default() -> None:
    for name, cells in in_readme_table().items():
        assert len(cells) == 2 and all(cells), (name, cells)


def test_shell_completion_is_documented_as_click_names_it() -> None:
    text = (REPO / "README.md").read_text()
    assert "_IMAGECTL_COMPLETE=bash_source imagectl" in text


def test_shell_completion_completes_a_command() -> None:
    import os
    import subprocess
    import sys

    imagectl = str(Path(sys.executable).with_name("imagectl"))
    env = {**os.environ, "_IMAGECTL_COMPLETE": "bash_complete", "COMP_WORDS": "imagectl dri",
           "COMP_CWORD": "1"}  # fmt: skip
    proc = subprocess.run([imagectl], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "plain,drift" in proc.stdout.splitlines()
