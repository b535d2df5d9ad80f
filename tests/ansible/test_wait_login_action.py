"""validate.yml's and fabric.yml's first step (action_plugins/imagectl_wait_login.py):
wait_for_connection's loop, one raw ``true`` per attempt over the host's own connection
instead of the ping module (an interpreter start, ~6.5 s of an emulated guest's CPU).

The real ssh connection plugin is used throughout; where a host is needed that refuses
logins for a while, ``ansible_ssh_executable`` is a script that stands in for ssh: it
exits 255 (ssh's own code for a connection failure) for its first attempts, then runs
the command ssh would have run on the host."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from tests.support import ROOT, flat, require_tool

PLUGINS = ROOT / "playbooks" / "action_plugins"
BOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: Wait for the host to take a login
      imagectl_wait_login:
        timeout: "{{ wait_timeout }}"
        sleep: 1
"""

# Stands in for ssh: refuses the first FAILS logins (exit 255), then runs the last
# argument (the remote command) with sh, recording every login it was asked for (the
# connection reset's "-O check" queries are not logins).
FAKE_SSH = """#!/bin/sh
case " $* " in *" -O "*) exit 255 ;; esac  # a master-connection query: none running
log="$(dirname "$0")/attempts"
echo "$@" >> "$log"
n=$(wc -l < "$log")
if [ "$n" -le {fails} ]; then
  echo "ssh: connect to host 192.0.2.1 port 22: Connection refused" >&2
  exit 255
fi
for last; do :; done
exec /bin/sh -c "$last"
"""


Run = tuple[subprocess.CompletedProcess[str], float]


def _run(tmp_path: Path, inventory: str, timeout: int) -> Run:
    book = tmp_path / "book.yml"
    book.write_text(BOOK)
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"wait_timeout": timeout}))
    env = dict(os.environ, ANSIBLE_ACTION_PLUGINS=str(PLUGINS), ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_PIPELINING="True")  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(
        [require_tool("ansible-playbook"), "-vvv", "-i", inventory, "-e", f"@{extra}", str(book)],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )  # fmt: skip
    return proc, time.monotonic() - started


def _fake_ssh(tmp_path: Path, fails: int) -> Path:
    ssh = tmp_path / "fake-ssh"
    ssh.write_text(FAKE_SSH.replace("{fails}", str(fails)))
    ssh.chmod(0o755)
    return ssh


def test_a_host_that_takes_the_login_after_refusals_is_waited_for(tmp_path: Path) -> None:
    ssh = _fake_ssh(tmp_path, fails=2)
    inventory = tmp_path / "hosts"
    inventory.write_text(f"node ansible_host=192.0.2.1 ansible_ssh_executable={ssh}\n")
    proc, _ = _run(tmp_path, str(inventory), timeout=60)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    attempts = (tmp_path / "attempts").read_text().splitlines()
    assert len(attempts) == 3  # two refused, the third logged in
    # each attempt is the one raw command, never a module shipped to an interpreter
    assert all(a.endswith("/bin/sh -c 'true && sleep 0'") for a in attempts), attempts
    assert "Using module file" not in flat(proc.stdout)  # wait_for_connection ships ping.py


def test_a_host_that_never_takes_the_login_fails_after_the_timeout(tmp_path: Path) -> None:
    ssh = _fake_ssh(tmp_path, fails=1000)
    inventory = tmp_path / "hosts"
    inventory.write_text(f"node ansible_host=192.0.2.1 ansible_ssh_executable={ssh}\n")
    proc, took = _run(tmp_path, str(inventory), timeout=3)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "timed out waiting for a login" in flat(proc.stdout)
    assert "Connection refused" in flat(proc.stdout)  # the last attempt's reason
    assert 3 <= took < 60


def test_a_closed_port_with_the_real_ssh_fails_after_the_timeout(tmp_path: Path) -> None:
    require_tool("ssh")
    with socket.socket() as s:  # a port nothing listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc, took = _run(tmp_path, f"127.0.0.1 ansible_port={port},", timeout=3)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "timed out waiting for" in flat(proc.stdout)
    assert took < 60


def test_a_local_host_logs_in_at_once(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts"
    inventory.write_text("localhost ansible_connection=local\n")
    proc, _ = _run(tmp_path, str(inventory), timeout=10)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "Using module file" not in flat(proc.stdout)
