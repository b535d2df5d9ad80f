"""Wheelhouses: downloaded with the lock's hashes, re-checked before reuse, and installed
by the validator role's own tasks with the network cut (no index, hashes required)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from imagectl.core.errors import UserError
from imagectl.supply.lock import LockSpec, write_lock
from imagectl.supply.lockfile import load
from imagectl.supply.wheelhouse import ensure_wheelhouse, tarball_wheels, verify_tarball
from tests.supply.tiny_wheels import tiny_index, tiny_wheel
from tests.support import ROOT, flat, require_root, require_tool

PLATFORMS = ("manylinux2014_x86_64",)
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture()
def world(tmp_path: Path) -> tuple[Path, str]:
    """A lock of the tiny index for this Python, and the index's URL."""
    url = tiny_index(tmp_path / "tiny")
    spec = LockSpec(
        path=tmp_path / "tiny.lock", title="tiny", command="test",
        requirements=("alpha>=0.5",), index_url=url, pythons=(PY, "3.10"), platforms=PLATFORMS,
    )  # fmt: skip
    return write_lock(spec), url


def _make(lock: Path, url: str, cache: Path) -> Path:
    return ensure_wheelhouse(lock, python=PY, platforms=PLATFORMS, folder=cache, index_url=url)


def _rewrite(tarball: Path, name: str, data: bytes) -> None:
    """Replace one member's bytes in a tarball (what tampering with the cache does)."""
    with tarfile.open(tarball) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    members[name] = data
    with tarfile.open(tarball, "w") as tar:
        for member, content in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))


def test_wheelhouse_holds_the_locked_wheels_and_their_lock(world, tmp_path) -> None:
    lock, url = world
    tarball = _make(lock, url, tmp_path / "cache")
    assert tarball_wheels(tarball) == ["alpha-1.0-py3-none-any.whl", "beta-2.1-py3-none-any.whl"]
    with tarfile.open(tarball) as tar:
        carried = tar.extractfile("requirements.lock").read().decode()  # type: ignore[union-attr]
    assert carried == load(lock).for_python(PY)
    shutil.rmtree(tmp_path / "tiny" / "index")  # the index is gone: the checked cache serves
    assert _make(lock, url, tmp_path / "cache") == tarball


def test_a_tampered_cached_wheel_is_refused_and_fetched_again(world, tmp_path) -> None:
    lock, url = world
    tarball = _make(lock, url, tmp_path / "cache")
    evil = tiny_wheel(tmp_path / "evil", "beta", "2.1").read_bytes() + b"\0"
    _rewrite(tarball, "beta-2.1-py3-none-any.whl", evil)
    with pytest.raises(UserError, match=r"beta-2.1-py3-none-any.whl has sha256 \w+, which is not"):
        verify_tarball(tarball, load(lock), PY)
    again = _make(lock, url, tmp_path / "cache")  # refused, downloaded again, checked
    verify_tarball(again, load(lock), PY)


def test_a_tampered_cache_without_the_index_stops_the_build(world, tmp_path) -> None:
    lock, url = world
    tarball = _make(lock, url, tmp_path / "cache")
    _rewrite(tarball, "alpha-1.0-py3-none-any.whl", b"not the locked wheel")
    shutil.rmtree(tmp_path / "tiny" / "index")
    with pytest.raises(UserError) as err:
        _make(lock, url, tmp_path / "cache")
    assert "the cached wheelhouse was refused" in err.value.message
    assert "alpha-1.0-py3-none-any.whl has sha256" in err.value.message


def test_an_index_serving_other_bytes_is_refused(world, tmp_path) -> None:
    """The lock pins beta 2.1's bytes; an index (a mirror, a man in the middle) serving a
    different beta-2.1 wheel is refused by pip's hash check: nothing is cached."""
    lock, url = world
    served = tmp_path / "tiny" / "index" / "beta" / "beta-2.1-py3-none-any.whl"
    tiny_wheel(tmp_path / "other", "beta", "2.1", ("alpha",))  # other metadata, other bytes
    shutil.copy(tmp_path / "other" / "beta-2.1-py3-none-any.whl", served)
    refused = r"(?s)downloading the wheels pinned in .*DO NOT MATCH THE HASHES.*Expected sha256"
    with pytest.raises(UserError, match=refused):
        _make(lock, url, tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*.tar"))


def _install_with_the_role(tarball: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The validator role's tasks/wheelhouse.yml, run by the real ansible-playbook against
    a fresh venv on this machine inside a network namespace with no interface up."""
    venv = tmp_path / "opt-imagectl"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    (venv / "dist").mkdir()
    playbook = tmp_path / "install.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role:\n        name: validator\n"
        "        tasks_from: wheelhouse.yml\n"
    )
    extra = {
        "validator_install_dir": str(venv),
        "validator_wheelhouse_src": str(tarball),
        "validator_wheelhouse_name": "wheelhouse",
        "ansible_python_interpreter": sys.executable,
    }
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROOT / "playbooks" / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    cmd = [
        "unshare", "--net", str(Path(sys.executable).parent / "ansible-playbook"),
        "-i", "localhost,", str(playbook), "--extra-vars", json.dumps(extra),
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)


def test_the_role_installs_a_wheelhouse_with_the_network_cut(world, tmp_path) -> None:
    require_root()  # the role's files are root's; unshare --net
    require_tool("ansible-playbook")
    require_tool("unshare")
    lock, url = world
    tarball = _make(lock, url, tmp_path / "cache")
    proc = _install_with_the_role(tarball, tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    python = tmp_path / "opt-imagectl" / "bin" / "python"
    out = subprocess.run(
        [str(python), "-c", "import alpha, beta; print(alpha.VERSION, beta.VERSION)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split() == ["1.0", "2.1"]


def test_the_role_refuses_a_wheel_whose_bytes_differ_from_the_lock(world, tmp_path) -> None:
    require_root()
    require_tool("ansible-playbook")
    require_tool("unshare")
    lock, url = world
    tarball = _make(lock, url, tmp_path / "cache")
    evil = tiny_wheel(tmp_path / "evil", "beta", "2.1", ("alpha",)).read_bytes()
    _rewrite(tarball, "beta-2.1-py3-none-any.whl", evil)
    proc = _install_with_the_role(tarball, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert "DO NOT MATCH THE HASHES" in flat(out), out[-4000:]
    python = tmp_path / "opt-imagectl" / "bin" / "python"
    gone = subprocess.run([str(python), "-c", "import beta"], capture_output=True, check=False)
    assert gone.returncode != 0
