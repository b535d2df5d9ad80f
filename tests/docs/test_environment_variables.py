"""The docs' table of environment variables (docs/environment.md, rendered from
``docs/data/environment.yaml``) lists exactly the ``IMAGECTL_*`` variables the code reads:
a variable added to the code without an entry, or an entry left for a variable the code no
longer reads, fails here, so the table cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.pages import DOCS, environment_variables

REPO = Path(__file__).resolve().parents[2]
PAGE = DOCS / "environment.md"
NAME = re.compile(r"\bIMAGECTL_[A-Z0-9_]*[A-Z0-9]\b")
SOURCES = ("pipeline", "validators", "playbooks")
SUFFIXES = {".py", ".yml", ".yaml", ".j2", ".hcl", ".sh"}
# click's completion variable: click reads it, and the page documents it in its section
NOT_SETTINGS = {"IMAGECTL_COMPLETE"}


def in_code() -> set[str]:
    found: set[str] = set()
    for folder in SOURCES:
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                found |= set(NAME.findall(path.read_text(errors="replace")))
    return found - NOT_SETTINGS


def in_page_table() -> dict[str, list[str]]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("# Environment variables", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `(IMAGECTL_[A-Z0-9_]+)` \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
    return rows


def test_every_variable_the_code_reads_has_an_entry_and_no_other() -> None:
    code = in_code()
    listed = [entry["name"] for entry in environment_variables()]
    assert code, "no IMAGECTL_ variable found in the code"
    assert len(listed) == len(set(listed)), "a variable listed twice"
    assert sorted(code - set(listed)) == [], "in the code, not in docs/data/environment.yaml"
    assert sorted(set(listed) - code) == [], "in docs/data/environment.yaml, not in the code"


def test_the_page_table_is_the_list() -> None:
    table = in_page_table()
    assert sorted(table) == sorted(in_code()), "docs/environment.md's table is not the code's"


def test_every_row_says_what_it_sets_and_its_default() -> None:
    for name, cells in in_page_table().items():
        assert len(cells) == 2 and all(cells), (name, cells)


def test_shell_completion_is_documented_as_click_names_it() -> None:
    text = PAGE.read_text(encoding="utf-8")
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
