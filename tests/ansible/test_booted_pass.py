"""site.yml gathers no facts in the local build's booted pass (exactly ``--tags booted``:
the manifest's writers and hygiene, which read none; the setup module cost ~8 s of that
pass under TCG) and gathers them for any other selection, the clouds' one pass included
(``--tags all``) and a booted pass widened to roles that read facts. site.yml's own
``gather_facts`` expression runs in a one-task play with the real ansible-playbook."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.support import ROOT, flat, require_tool

BOOK = """\
- hosts: all
  gather_facts: {expression}
  gather_subset: ["!all", "min"]
  tasks:
    - name: Facts seen
      ansible.builtin.debug:
        msg: "facts={{{{ ansible_facts | length }}}}"
      tags: [booted, base, always]
"""


def _site_expression() -> str:
    (play,) = YAML(typ="safe").load((ROOT / "playbooks" / "site.yml").read_text())
    expression = play["gather_facts"]
    assert isinstance(expression, str) and "ansible_run_tags" in expression
    return expression


@pytest.mark.parametrize(
    ("tags", "gathers"),
    [("booted", False), ("all", True), ("booted,base", True), ("base", True)],
)
def test_only_the_booted_pass_skips_the_facts(tmp_path: Path, tags: str, gathers: bool) -> None:
    book = tmp_path / "book.yml"
    book.write_text(BOOK.format(expression=f'"{_site_expression()}"'))
    proc = subprocess.run(
        [require_tool("ansible-playbook"), "-i", "localhost,", "-c", "local", str(book),
         "--tags", tags, "-e", f"ansible_python_interpreter={sys.executable}"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("Gathering Facts" in flat(proc.stdout)) is gathers, proc.stdout
    assert ("facts=0" in flat(proc.stdout)) is not gathers, proc.stdout
