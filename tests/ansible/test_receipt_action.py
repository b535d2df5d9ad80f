"""validate.yml's last step (action_plugins/imagectl_receipt.py) writes each host's receipt
on the controller: the validator's output byte for byte, whole or not at all, 0600, and
without a connection to the host (a module run per receipt cost ~1.4 s of CPU; a host
whose connection is gone after its run still gets its receipt written)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT, flat, require_tool

PLUGINS = ROOT / "playbooks" / "action_plugins"
BOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: Fetch the receipt
      imagectl_receipt:
        content: "{{ text }}"
        dest: "{{ dest }}"
"""


def _run(tmp_path: Path, text: str, dest: Path, host: str) -> subprocess.CompletedProcess[str]:
    book = tmp_path / "book.yml"
    book.write_text(BOOK)
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"text": text, "dest": str(dest)}))
    env = dict(os.environ, ANSIBLE_ACTION_PLUGINS=str(PLUGINS), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [require_tool("ansible-playbook"), "-i", f"{host},", "-e", f"@{extra}", str(book)],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )  # fmt: skip


# Text that templating could turn into data (a mapping, a list, a number) stays the
# validator's bytes: key order, spacing and a trailing newline kept as one.
@pytest.mark.parametrize(
    "text",
    ['{"b": 1,   "a": [2, 3]}', "[1, 2]", "12", '{\n  "kind": "receipt"\n}\n'],
)
def test_the_receipt_is_the_validators_text(tmp_path: Path, text: str) -> None:
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    dest = receipts / "host-1.json"
    proc = _run(tmp_path, text, dest, "localhost ansible_connection=local")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dest.read_text() == text.rstrip("\n") + "\n"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert [p.name for p in receipts.iterdir()] == ["host-1.json"]  # no partial file left


def test_no_connection_to_the_host_is_made(tmp_path: Path) -> None:
    # TEST-NET-1 (RFC 5737): nothing answers there; a task that connected would fail
    # unreachable
    dest = tmp_path / "gone.json"
    host = "gone ansible_host=192.0.2.1 ansible_connection=ssh ansible_ssh_timeout=1"
    proc = _run(tmp_path, '{"ok": true}', dest, host)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(dest.read_text()) == {"ok": True}


def test_an_unwritable_destination_fails_the_host_and_leaves_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "missing" / "host-1.json"
    proc = _run(tmp_path, "{}", dest, "localhost ansible_connection=local")
    assert proc.returncode != 0
    assert "imagectl_receipt: cannot write" in flat(proc.stdout + proc.stderr), proc.stdout
    assert not dest.parent.exists()
