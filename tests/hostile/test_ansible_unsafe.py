"""Code in a stack value never runs on the build machine: two defences, tested apart.

1. The schema refuses it (tests/hostile/test_stacks.py: ``imagectl lint`` exits 2).
2. Should a value get past the schema anyway, the Ansible vars file marks every string
   unsafe, so Ansible never renders it as a template. This file proves the second
   defence alone: the stack models are filled without validation (``model_copy``), the
   production writer (``write_var_files``) writes the vars file, and the real
   ``ansible-playbook`` runs a tiny local play that uses the values the way the roles do
   (``base`` joins name=version, ``infiniband`` builds its repository URL). The
   ``lookup('pipe', 'touch ...')`` must never create its file, and the literal text must
   arrive in the play's output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from imagectl.compat.data import load_compat
from imagectl.core.errors import UserError
from imagectl.packer.variables import ansible_unsafe, write_var_files
from imagectl.stacks import load_stack, resolve
from tests.support import REPO

PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: the way roles/base joins the pins, and roles/infiniband builds its URL
      ansible.builtin.copy:
        dest: "{{ out_file }}"
        content: |
          {{ base_packages | dict2items | map(attribute='key') | zip(base_packages.values())
             | map('join', '=') | list | to_json }}
          https://repo.example/doca/{{ infiniband_doca_ofed_version }}/ubuntu22.04
          {{ manifest_stack_name }}
"""


def _hostile_vars(tmp_path: Path, marker: Path) -> tuple[Path, str]:
    payload = f"{{{{ lookup('pipe', 'touch {marker}') }}}}"
    loaded = load_stack(REPO / "images" / "stacks" / "h100-training.yaml")
    stack = loaded.stack
    assert stack.network.infiniband is not None and stack.clouds.azure is not None
    ib = stack.network.infiniband.model_copy(update={"doca_ofed": f"3.1.0{payload}"})
    network = stack.network.model_copy(update={"infiniband": ib})
    stack = stack.model_copy(update={"network": network})
    resolved = resolve(stack, load_compat(REPO / "images" / "compat"))
    _, avars_file, _, avars = write_var_files(resolved, "azure", tmp_path / "vars")
    # a package version past the schema too: base_packages is a dict of name -> version
    raw = json.loads(avars_file.read_text())
    raw["base_packages"] = ansible_unsafe({"jq": f"1.6-2{payload}"})
    avars_file.write_text(json.dumps(raw))
    assert avars["infiniband_doca_ofed_version"] == f"3.1.0{payload}"
    return avars_file, payload


def test_a_template_in_a_stack_value_is_never_rendered(tmp_path: Path) -> None:
    marker = Path("/tmp") / f"PWNED-{uuid.uuid4().hex}"
    avars_file, payload = _hostile_vars(tmp_path, marker)
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    out_file = tmp_path / "out.txt"
    ansible_playbook = Path(sys.executable).with_name("ansible-playbook")
    try:
        proc = subprocess.run(
            [
                str(ansible_playbook),
                "-i",
                "localhost,",
                "-c",
                "local",
                str(play),
                "--extra-vars",
                f"@{avars_file}",
                "--extra-vars",
                f"out_file={out_file}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={"ANSIBLE_NOCOLOR": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not marker.exists(), "Ansible rendered a stack value: the command ran"
        written = out_file.read_text()
        assert f'"jq=1.6-2{payload}"' in written
        assert f"/doca/3.1.0{payload}/ubuntu22.04" in written
        assert "h100-training" in written
    finally:
        marker.unlink(missing_ok=True)


@pytest.mark.parametrize("key", ["{{ lookup('pipe', 'id') }}", "jq\n", "a b"])
def test_a_key_ansible_could_template_is_refused(key: str) -> None:
    with pytest.raises(UserError) as err:
        ansible_unsafe({"base_packages": {key: "1.0"}})
    assert "refusing to hand Ansible the key" in err.value.render()
    assert "base_packages" in err.value.render()
