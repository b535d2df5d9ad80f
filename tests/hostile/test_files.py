"""Files and permissions: keys are private and never left behind, lock files follow no
symbolic link, and the fleet's boot receipt lists no user's files."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support import REPO, require_tool


def test_the_wheel_lock_follows_no_symlink(tmp_path: Path) -> None:
    """A link planted where the wheel-build lock goes must not truncate its target."""
    from imagectl.core.errors import UserError
    from imagectl.packer.build import build_validator_wheel
    from imagectl.paths import Workspace

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    root = tmp_path / "tree"
    (root / "build").mkdir(parents=True)
    os.symlink(victim, root / "build" / ".imagectl-wheel.lock")
    with pytest.raises(UserError) as err:
        build_validator_wheel(Workspace(root=root, images=root / "images"), tmp_path / "dist")
    assert "cannot open the lock file" in err.value.render()
    assert victim.read_text() == "precious\n"


def test_validate_image_leaves_no_key_or_work_folder(
    cli: Any, aws_moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that makes its own SSH key (hosts reached over SSH, which never come up):
    while it runs the key is 0600 in a 0700 folder; afterwards nothing of it is left."""
    require_tool("ssh-keygen")
    from tests.clouds.scenario import HEALTHY, write_override
    from tests.fakes.fixtures import CloudEnv

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where mkdtemp puts folders
    env = CloudEnv("aws", aws_moto)
    image = env.seed_candidate()
    env.never_running()
    override = write_override(tmp_path, [HEALTHY])
    data = YAML(typ="safe").load(override.read_text())
    del data["all"]["ansible_connection"]  # real SSH: the run needs its own key
    with override.open("w") as fh:
        YAML().dump(data, fh)

    seen: dict[str, int] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for key in scratch.glob("imagectl-key-*/id_ed25519"):
                seen["key"] = stat.S_IMODE(key.stat().st_mode)
                seen["folder"] = stat.S_IMODE(key.parent.stat().st_mode)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = cli(
            "validate-image", image.image_id, "--cloud", "aws", "--stack", "h100-training",
            "--inventory-override", str(override), "--reach-timeout", "1",
            "--runner-cidr", "203.0.113.7/32", "--json",
        )  # fmt: skip
    finally:
        done.set()
        watcher.join(5)
    assert result.code == 1 and result.json()["verdict"] == "inconclusive", result.err
    assert seen == {"key": 0o600, "folder": 0o700}
    assert sorted(p.name for p in scratch.iterdir()) == []


def test_the_fleet_boot_receipt_lists_no_users_files(tmp_path: Path) -> None:
    """The boot unit's real command line (rendered by Ansible from the role) run on a
    root holding a user's shell history and cloud credentials."""
    play = tmp_path / "render.yml"
    unit = tmp_path / "boot.service"
    role = REPO / "playbooks" / "roles" / "validator"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n"
        f"  vars_files: [{role / 'defaults' / 'main.yml'}]\n"
        "  tasks:\n    - ansible.builtin.template:\n"
        f"        src: {role / 'templates/etc/systemd/system/imagectl-boot-validate.service.j2'}\n"
        f"        dest: {unit}\n"
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c",
         "local", "-e", f"ansible_python_interpreter={sys.executable}", str(play)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (exec_start,) = [ln for ln in unit.read_text().splitlines() if ln.startswith("ExecStart=")]
    argv = exec_start.removeprefix("ExecStart=").split()
    assert argv[0] == "/opt/imagectl/bin/imagectl" and argv[1] == "validate"

    fleet_root = tmp_path / "node"
    (fleet_root / "home" / "alice" / ".aws").mkdir(parents=True)
    (fleet_root / "home" / "alice" / ".bash_history").write_text("ls\n")
    (fleet_root / "home" / "alice" / ".aws" / "credentials").write_text("[default]\n")
    (fleet_root / "root").mkdir()

    def receipt(args: list[str]) -> str:
        out = tmp_path / "boot-receipt.json"
        args = [*args[: args.index("--expect")], "--stack", "local"]  # no /etc/imagectl here
        subprocess.run(
            [str(Path(sys.executable).with_name("imagectl")), *args[1:], "--hygiene-root",
             str(fleet_root), "-o", str(out)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        return out.read_text()

    assert "/home/alice" not in receipt(argv)
    without = [a for a in argv if a != "--no-hygiene"]  # control: what the flag prevents
    assert "/home/alice/.bash_history" in receipt(without)


def test_a_copy_cleans_what_a_killed_copy_left(tmp_path: Path) -> None:
    """A promotion killed mid-copy leaves ``.<image>.<token>.tmp`` in the region; the
    resumed copy of that image removes it and places the image whole."""
    from imagectl.clouds.local.provider import LocalProvider, file_digest
    from imagectl.clouds.local.spec import LocalOptions

    disk = tmp_path / "image.qcow2"
    disk.write_bytes(os.urandom(64 * 1024))
    hex_ = file_digest(disk).removeprefix("sha256:")
    images = tmp_path / "registry" / "local-a" / "images"
    images.mkdir(parents=True)
    stale = images / f".{hex_}.qcow2.0123abcd.tmp"
    stale.write_bytes(disk.read_bytes()[:1000])  # half a copy
    registry = LocalProvider(LocalOptions(root=tmp_path / "registry"))
    image = registry.import_image(disk, region="local-a", stack="local", digest="sha256:00")
    assert not stale.exists()
    assert sorted(p.name for p in images.iterdir()) == [f"{hex_}.json", f"{hex_}.qcow2"]
    assert file_digest(images / f"{hex_}.qcow2") == image.image_id
