"""Run playbooks/site.yml with the real ansible-playbook against a root file system."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT

_RECAP = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.M,
)


@dataclass
class PlaybookRun:
    returncode: int
    output: str
    ok: int = 0
    changed: int = 0
    failed: int = 0

    @property
    def changed_tasks(self) -> list[str]:
        """Names of tasks that reported a change (for idempotence messages)."""
        out, task = [], ""
        for line in self.output.splitlines():
            if line.startswith("TASK ["):
                task = line.split("[", 1)[1].rsplit("]", 1)[0]
            elif line.startswith("changed:") and task not in out:
                out.append(task)
        return out

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.output.splitlines()[-n:])


def run_site(
    rootfs: Path,
    extra_vars_file: Path,
    log: Path,
    *extra: str,
    playbook: Path | None = None,
) -> PlaybookRun:
    inventory = log.with_suffix(".ini")
    inventory.write_text(
        f"[image]\n{rootfs} ansible_connection=imagectl_chroot "
        "ansible_python_interpreter=/usr/bin/python3\n"
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "playbooks" / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(inventory),
            str(playbook or ROOT / "playbooks" / "site.yml"),
            "--extra-vars",
            f"@{extra_vars_file}",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    output = proc.stdout + proc.stderr
    log.write_text(output)
    result = PlaybookRun(proc.returncode, output)
    m = _RECAP.search(output)
    if m:
        result.ok, result.changed, result.failed = int(m["ok"]), int(m["changed"]), int(m["failed"])
    return result
