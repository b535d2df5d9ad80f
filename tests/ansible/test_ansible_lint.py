"""ansible-lint (production profile) and ansible-playbook --syntax-check on playbooks/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from imagectl.packer.variables import ansible_vars
from imagectl.stacks import load_resolved, stack_paths
from tests.support import ROOT, flat, require_tool

PLAYBOOKS = ROOT / "playbooks"


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def test_every_ansible_var_is_a_role_default() -> None:
    defaults: set[str] = set()
    for f in PLAYBOOKS.glob("roles/*/defaults/main.yml"):
        defaults |= set(yaml.safe_load(f.read_text()) or {})
    for path in stack_paths(ROOT / "images" / "stacks"):
        _, resolved = load_resolved(ROOT / "images", path.stem)
        for cloud in resolved.stack.clouds.enabled():
            missing = set(ansible_vars(resolved, cloud)) - defaults
            assert missing == set(), f"{path.stem}/{cloud}: {sorted(missing)}"


def test_every_ansible_var_is_read_by_a_role() -> None:
    """A var a role declares but never reads is a pin that pins nothing (the driver
    branch was passed and declared, and no task read it)."""
    read = "\n".join(
        p.read_text()
        for p in PLAYBOOKS.rglob("*")
        if p.is_file() and p.suffix in (".yml", ".j2", ".py") and p.parent.name != "defaults"
    )
    for path in stack_paths(ROOT / "images" / "stacks"):
        _, resolved = load_resolved(ROOT / "images", path.stem)
        for cloud in resolved.stack.clouds.enabled():
            unread = {v for v in ansible_vars(resolved, cloud) if not re.search(rf"\b{v}\b", read)}
            assert unread == set(), f"{path.stem}/{cloud}: no role reads {sorted(unread)}"


def test_every_role_has_defaults_readme_and_meta() -> None:
    roles = sorted(p for p in (PLAYBOOKS / "roles").iterdir() if p.is_dir())
    assert len(roles) == 13
    table = (PLAYBOOKS / "README.md").read_text()
    for role in roles:
        for part in ("defaults/main.yml", "tasks/main.yml", "meta/main.yml", "README.md"):
            assert (role / part).is_file(), f"{role.name}/{part}"
        assert f"`{role.name}`" in table, role.name


def test_syntax_check() -> None:
    playbook = require_tool("ansible-playbook")
    proc = subprocess.run(
        [playbook, "--syntax-check", "-i", "localhost,", str(PLAYBOOKS / "site.yml")],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_ansible_lint_production_profile() -> None:
    lint = require_tool("ansible-lint")
    proc = subprocess.run(
        [lint, "-c", str(PLAYBOOKS / ".ansible-lint"), "--offline", "--nocolor", str(PLAYBOOKS)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Profile 'production' was required, and it passed" in flat(out), out
