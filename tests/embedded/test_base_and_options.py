"""Base image cache keys, region choice and the CLI's bad-input paths (no VM needed)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from imagectl.core.errors import UserError
from imagectl.embedded.base import (
    BASE_PACKAGES,
    BaseSpec,
    cached_tree,
    debootstrap_tree,
    find_base,
    sweep_leftovers,
)
from imagectl.orchestrate.run import choose_regions
from imagectl.stacks import load_resolved

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def resolved():
    return load_resolved(REPO / "images", "local")[1]


def test_base_spec_follows_the_stack_pins(resolved):
    spec = BaseSpec.from_stack(resolved)
    assert spec.kernel == resolved.stack.clouds.local.kernel
    assert spec.codename == "bookworm"
    assert "python3-venv" in spec.packages and "openssh-server" in spec.packages
    assert spec.packages == BASE_PACKAGES


def test_base_key_changes_with_what_changes_the_disk(resolved):
    spec = BaseSpec.from_stack(resolved)
    same = BaseSpec.from_stack(resolved)
    assert spec.key() == same.key()
    assert dataclasses.replace(spec, kernel="6.1.0-50-cloud-amd64").key() != spec.key()
    assert dataclasses.replace(spec, mirror="http://example/debian").key() != spec.key()
    assert dataclasses.replace(spec, packages=(*spec.packages, "jq")).key() != spec.key()
    # the debootstrap stage does not depend on the kernel (it is installed afterwards)
    other_kernel = dataclasses.replace(spec, kernel="6.1.0-50-cloud-amd64")
    assert other_kernel.debootstrap_key() == spec.debootstrap_key()


def test_an_incomplete_base_folder_is_not_a_cache_hit(resolved, _isolated_state: Path):
    spec = BaseSpec.from_stack(resolved)
    folder = _isolated_state / "local" / "base" / spec.key()
    folder.mkdir(parents=True)
    for name in ("disk.qcow2", "vmlinuz", "initrd.img", "id_ed25519"):
        (folder / name).write_bytes(b"x")
    assert find_base(spec) is None  # no rootfs.tar (the candidate is provisioned from it)
    (folder / "rootfs.tar").write_bytes(b"x")
    assert find_base(spec) is None  # base.json is written last
    (folder / "base.json").write_text("{}")
    found = find_base(spec)
    assert found is not None and found.cached and found.disk == folder / "disk.qcow2"


def test_the_debootstrap_tree_is_shared_by_state_folders_when_it_can_be_trusted(
    resolved, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The tree is unpacked as root into the image's root, so a kept one is used only
    while this user owns it and nobody else can write it or its folder; it lives in the
    cache folder, not the state folder, so a fresh state folder finds it."""
    spec = BaseSpec.from_stack(resolved)
    tree = debootstrap_tree(spec)
    assert tree.parent == tmp_path / "cache" / "local"  # conftest's IMAGECTL_CACHE_DIR
    assert cached_tree(spec) is None  # none kept yet
    tree.write_bytes(b"tar")
    tree.chmod(0o644)
    assert cached_tree(spec) == tree
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "another-state"))
    assert cached_tree(spec) == tree
    tree.chmod(0o666)  # anyone may write it: another user's tree, in effect
    assert cached_tree(spec) is None
    tree.chmod(0o644)
    tree.parent.chmod(0o777)  # anyone may replace it
    assert cached_tree(spec) is None
    tree.parent.chmod(0o700)
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(tree, 4242, -1)  # another user's tree
        assert cached_tree(spec) is None
        os.chown(tree, 0, -1)
        assert cached_tree(spec) == tree
    tree.unlink()
    tree.symlink_to(tmp_path / "elsewhere.tar")
    (tmp_path / "elsewhere.tar").write_bytes(b"tar")
    assert cached_tree(spec) is None  # a link may point anywhere


def test_leftovers_of_killed_builds_and_the_old_layout_are_swept(resolved, _isolated_state: Path):
    """A debootstrap killed while writing its tree leaves a pid-named partial copy, a
    killed base build its work folder, and state folders from before the cache folder
    keep their own tree: all are removed; a partial or a build whose process is alive,
    and the kept tree, stay."""
    spec = BaseSpec.from_stack(resolved)
    tree = debootstrap_tree(spec)
    tree.write_bytes(b"tar")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    dead = tree.with_name(f".{tree.name}.{gone.pid}.partial")
    writing = tree.with_name(f".{tree.name}.{os.getpid()}.partial")
    old = _isolated_state / "local" / "base" / f"debootstrap-{spec.debootstrap_key()}.tar"
    old.parent.mkdir(parents=True)
    for path in (dead, writing, old):
        path.write_bytes(b"part")
    # a base build killed mid-way (its chroot's root inside), and one still building
    killed = old.parent / f".{spec.key()}.build-{gone.pid}"
    building = old.parent / f".{spec.key()}.build-{os.getpid()}"
    for work in (killed, building):
        (work / "rootfs" / "etc").mkdir(parents=True)
        (work / "rootfs" / "etc" / "hostname").write_text("x\n")
    assert sorted(sweep_leftovers()) == sorted([dead, old, killed])
    assert not dead.exists() and not old.exists() and not killed.exists()
    assert writing.exists() and tree.read_bytes() == b"tar"
    assert (building / "rootfs" / "etc" / "hostname").exists()
    assert sweep_leftovers() == []


def test_regions_are_the_first_n_of_the_stack(resolved):
    assert choose_regions(resolved, None) == ["local-a", "local-b", "local-c"]
    assert choose_regions(resolved, 2) == ["local-a", "local-b"]
    with pytest.raises(UserError, match="has 3 local regions"):
        choose_regions(resolved, 4)
    with pytest.raises(UserError):
        choose_regions(resolved, 0)


def test_cli_too_many_regions_is_bad_input(cli):
    res = cli("--root", str(REPO), "run", "--stack", "local", "--regions", "7")
    assert res.code == 2
    assert "--regions 7" in res.err and "local-a" in res.err


def test_cli_a_stack_without_local_cloud_is_bad_input(cli):
    res = cli("--root", str(REPO), "run", "--stack", "h100-training")
    assert res.code == 2
    assert "clouds.local" in res.err


def test_cli_unknown_fault_is_bad_input(cli):
    res = cli("--root", str(REPO), "run", "--inject-fault", "nonsense")
    assert res.code == 2
    assert "nonsense" in res.err
