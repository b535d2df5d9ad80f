"""nvidia_repo trusts NVIDIA's repository key only when its fingerprint is the pinned one.

The key is downloaded from the repository's (overridable) URL, so a mirror could serve any
key. Keys here are real OpenPGP keys made by gpg; the role's own tasks (tasks/key.yml) run
with the real ansible-playbook, and the fingerprint reader is checked against gpg's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openpgp_keys import gpg_key

from imagectl.paths import find_workspace
from imagectl.supply.apt_keys import load_apt_keys
from tests.support import ROOT, flat, require_root, require_tool

READER = ROOT / "playbooks" / "roles" / "nvidia_repo" / "files" / "openpgp-fingerprints.py"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, list[str]]]:
    tmp = tmp_path_factory.mktemp("gpg")
    return {
        "one": gpg_key(tmp / "one", "stand-in one <one@example.invalid>"),
        "two": gpg_key(tmp / "two", "stand-in two <two@example.invalid>", "rsa2048"),
    }


def test_reader_agrees_with_gpg(keys, tmp_path) -> None:
    for armored, fprs in keys.values():
        path = tmp_path / "key.asc"
        path.write_bytes(armored)
        proc = subprocess.run([sys.executable, str(READER), str(path), fprs[0]],
                              capture_output=True, text=True, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)
        assert [got["primary"][0], *got["subkeys"]] == fprs  # gpg lists primary, then subkeys


def test_reader_refuses_an_added_key_and_garbage(keys, tmp_path) -> None:
    (one, one_fprs), (two, _) = keys["one"], keys["two"]
    both = tmp_path / "both.asc"
    both.write_bytes(one + two)  # a pinned key plus one nobody pinned: apt would trust both
    proc = subprocess.run([sys.executable, str(READER), str(both), one_fprs[0]],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 1 and "refusing to trust it" in flat(proc.stderr)
    junk = tmp_path / "junk.asc"
    junk.write_text(
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\nstand-in\n-----END PGP PUBLIC KEY BLOCK-----\n"
    )
    proc = subprocess.run([sys.executable, str(READER), str(junk), one_fprs[0]],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 1 and "is not an OpenPGP public key file" in flat(proc.stderr)


def test_pinned_fingerprint_is_nvidias_with_its_source() -> None:
    key = load_apt_keys(find_workspace(ROOT).compat_dir)["nvidia-cuda"]
    assert key.key_file == "3bf863cc.pub"
    assert key.fingerprints == ("EB693B3035CD5710E231E123A4B469963BF863CC",)
    assert key.fingerprints[0].lower().endswith(key.key_file.removesuffix(".pub"))
    assert "cuda-repo-management" in key.source


def _run_key_tasks(tmp_path: Path, served: bytes, extra: dict[str, object]):
    """tasks/key.yml with the role's defaults, NVIDIA's repository replaced by a folder."""
    repo = tmp_path / "nvrepo" / "ubuntu2204" / "x86_64"
    repo.mkdir(parents=True)
    (repo / "3bf863cc.pub").write_bytes(served)
    playbook = tmp_path / "key.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role:\n        name: nvidia_repo\n"
        "        tasks_from: key.yml\n"
    )
    key = load_apt_keys(find_workspace(ROOT).compat_dir)["nvidia-cuda"]
    variables = {
        "nvidia_repo_base_url": (tmp_path / "nvrepo").as_uri(),
        "nvidia_repo_keyring": str(tmp_path / "keyring.asc"),
        "nvidia_repo_key_file": key.key_file,
        "nvidia_repo_key_fingerprints": list(key.fingerprints),
        "ansible_python_interpreter": sys.executable,
        **extra,
    }
    downloads = tmp_path / "tmp"  # the role's tempfile lands here: this test's alone
    downloads.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(downloads),
        "ANSIBLE_ROLES_PATH": str(ROOT / "playbooks" / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
           str(playbook), "--extra-vars", json.dumps(variables)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)


def test_role_refuses_a_key_with_another_fingerprint(keys, tmp_path) -> None:
    require_root()  # the keyring is root's
    require_tool("ansible-playbook")
    armored, fprs = keys["one"]
    proc = _run_key_tasks(tmp_path, armored, {})  # pinned: NVIDIA's, served: another key
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert f"holds the key(s) {fprs[0]}, not the pinned fingerprint(s) EB693B30" in flat(out)
    assert not (tmp_path / "keyring.asc").exists(), "a refused key must never reach apt"
    # the download was made in this run's temporary folder (the failed check names it),
    # and is gone: not a glob of /tmp, where other tests' runs of the role come and go
    assert f"{tmp_path / 'tmp'}/ansible." in flat(out), out[-4000:]
    assert not list((tmp_path / "tmp").glob("ansible.*.nvidia-key")), "the download is removed"


def test_role_trusts_a_key_with_the_pinned_fingerprint(keys, tmp_path) -> None:
    require_root()
    require_tool("ansible-playbook")
    armored, fprs = keys["two"]
    proc = _run_key_tasks(tmp_path, armored, {"nvidia_repo_key_fingerprints": [fprs[0]]})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert (tmp_path / "keyring.asc").read_bytes() == armored
