"""The validator toolkit's wheelhouse, made on the controller by the real ``pip download``
against a package index: here a PEP 503 index on disk (``IMAGECTL_TOOLKIT_INDEX_URL``)
serving wheels laid out like torch's, so no multi-GB download happens in the suite. The
toolkit's lock is made from that index by the real lock command (``make_lock``)."""

from __future__ import annotations

import dataclasses
import tarfile

import pytest

from imagectl.core.errors import UserError
from imagectl.packer.variables import ansible_vars
from imagectl.paths import find_workspace
from imagectl.stacks import load_resolved
from imagectl.supply.lock import LockSpec, toolkit_requirement, write_lock
from imagectl.toolkit import (
    INDEX_ENV,
    PLATFORMS,
    ensure_toolkit_wheelhouse,
    target_python,
    toolkit_pin,
)
from tests.support import fake_torch_wheel, simple_index


def _lock(tmp_path, url: str, torch: str = "2.9.1", variant: str = "cu128"):
    """The toolkit's lock as python -m imagectl.supply.lock toolkit makes it (Python 3.10)."""
    spec = LockSpec(
        path=tmp_path / f"torch-{torch}-{variant}.lock",
        title=f"torch {torch} ({variant})",
        command="test",
        requirements=(toolkit_requirement(torch, variant),),
        index_url=url,
        pythons=("3.10",),
        platforms=PLATFORMS,
    )
    return write_lock(spec)


@pytest.fixture()
def h100():
    return load_resolved(find_workspace().images, "h100-training")[1]


def test_pin_and_python_come_from_the_stack(h100, monkeypatch) -> None:
    monkeypatch.delenv(INDEX_ENV, raising=False)
    pin = toolkit_pin(h100)
    assert pin is not None
    assert (pin.torch, pin.cuda, pin.variant) == ("2.9.1", "12.8", "cu128")
    assert pin.index_url == "https://download.pytorch.org/whl/cu128"
    assert target_python(h100) == "3.10"  # Ubuntu 22.04's python3
    # lean (the default): the image's validator role installs no toolkit
    lean = ansible_vars(h100, "aws")
    assert (lean["validator_toolkit_torch"], lean["validator_toolkit_wheelhouse"]) == ("", "")
    # baked (validation.toolkit.install: bake): the role installs the pinned one
    avars = ansible_vars(_baked(h100), "aws", validator_toolkit_wheelhouse="/tmp/tk.tar")
    assert avars["validator_toolkit_torch"] == "2.9.1"
    assert avars["validator_toolkit_cuda"] == "12.8"
    assert avars["validator_toolkit_wheelhouse"] == "/tmp/tk.tar"


def _baked(resolved):
    stack = resolved.stack
    toolkit = stack.validation.toolkit.model_copy(update={"install": "bake"})
    validation = stack.validation.model_copy(update={"toolkit": toolkit})
    return dataclasses.replace(resolved, stack=stack.model_copy(update={"validation": validation}))


def test_wheelhouse_holds_the_pinned_variant_and_is_cached(h100, tmp_path, monkeypatch) -> None:
    url = simple_index(tmp_path / "index", [fake_torch_wheel(tmp_path / "w")])
    monkeypatch.setenv(INDEX_ENV, url)
    lock = _lock(tmp_path, url)
    tarball = ensure_toolkit_wheelhouse(h100, folder=tmp_path / "cache", lock=lock)
    with tarfile.open(tarball) as tar:
        assert tar.getnames() == ["requirements.lock", "torch-2.9.1+cu128-py3-none-any.whl"]
    assert not list((tmp_path / "cache").glob("*.partial"))
    (tmp_path / "index" / "torch" / "index.html").unlink()  # the index is gone: the cache serves
    assert ensure_toolkit_wheelhouse(h100, folder=tmp_path / "cache", lock=lock) == tarball


def test_a_wheel_of_another_cuda_variant_is_refused(h100, tmp_path, monkeypatch) -> None:
    """A wheel named +cu128 whose torch/version.py says CUDA 12.6 (a mislabelled build)."""
    wheel = fake_torch_wheel(tmp_path / "w", version="2.9.1+cu128", cuda="12.6")
    url = simple_index(tmp_path / "index", [wheel])
    monkeypatch.setenv(INDEX_ENV, url)
    with pytest.raises(UserError, match=r"built for CUDA 12.6, but the stack pins the cu128"):
        ensure_toolkit_wheelhouse(h100, folder=tmp_path / "cache", lock=_lock(tmp_path, url))
    assert not list((tmp_path / "cache").glob("*.tar"))


def test_a_cpu_build_is_refused(h100, tmp_path, monkeypatch) -> None:
    wheel = fake_torch_wheel(tmp_path / "w", version="2.9.1+cu128", cuda=None)
    url = simple_index(tmp_path / "index", [wheel])
    monkeypatch.setenv(INDEX_ENV, url)
    with pytest.raises(UserError, match=r"built for CUDA none \(cpu\)"):
        ensure_toolkit_wheelhouse(h100, folder=tmp_path / "cache", lock=_lock(tmp_path, url))


def test_an_index_without_the_release_is_a_clear_error(h100, tmp_path, monkeypatch) -> None:
    lock = _lock(tmp_path, simple_index(tmp_path / "good", [fake_torch_wheel(tmp_path / "w")]))
    wheel = fake_torch_wheel(tmp_path / "old", version="2.8.0+cu128")
    monkeypatch.setenv(INDEX_ENV, simple_index(tmp_path / "index", [wheel]))
    with pytest.raises(UserError, match=r"downloading the validator toolkit torch==2.9.1"):
        ensure_toolkit_wheelhouse(h100, folder=tmp_path / "cache", lock=lock)


def test_a_toolkit_without_a_lock_is_not_built(h100, tmp_path) -> None:
    with pytest.raises(UserError, match=r"no lock file at .*torch-2.9.1-cu128.lock") as raised:
        ensure_toolkit_wheelhouse(h100, folder=tmp_path, lock=tmp_path / "torch-2.9.1-cu128.lock")
    assert "python -m imagectl.supply.lock toolkit" in str(raised.value)


def test_the_repositorys_own_toolkit_lock_is_looked_for_and_named(h100, tmp_path) -> None:
    """The repository ships no toolkit lock: the build says which file and how it is made
    (docs/stacks.md says the same)."""
    from imagectl.supply.lock import toolkit_lock_path

    path = toolkit_lock_path("2.9.1", "cu128")
    if path.is_file():
        pytest.skip("a toolkit lock is committed: the build uses it")
    with pytest.raises(UserError, match="the repository ships none") as raised:
        ensure_toolkit_wheelhouse(h100, folder=tmp_path)
    assert str(path) in str(raised.value) and "python -m imagectl.supply.lock" in str(raised.value)


def test_a_lock_of_another_release_is_refused(h100, tmp_path) -> None:
    wheel = fake_torch_wheel(tmp_path / "w", version="2.8.0+cu128")
    lock = _lock(tmp_path, simple_index(tmp_path / "index", [wheel]), torch="2.8.0")
    with pytest.raises(UserError, match=r"the lock pins torch 2.8.0\+cu128, but the stack pins"):
        ensure_toolkit_wheelhouse(h100, folder=tmp_path / "cache", lock=lock)


def test_stacks_without_a_toolkit_have_none(tmp_path) -> None:
    local = load_resolved(find_workspace().images, "local")[1]
    assert toolkit_pin(local) is None
    assert ansible_vars(local, "local")["validator_toolkit_torch"] == ""
    with pytest.raises(UserError, match="pins no validation.toolkit"):
        ensure_toolkit_wheelhouse(local, folder=tmp_path)
