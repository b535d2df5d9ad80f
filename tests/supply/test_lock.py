"""Lock files: made by pip's resolver for each target Python, deterministic, and the
committed validator lock in step with pyproject.toml."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from imagectl.core.errors import UserError
from imagectl.paths import find_workspace
from imagectl.supply.lock import LockSpec, is_current, make_lock, validator_spec, write_lock
from imagectl.supply.lockfile import LockEntry, load, parse
from imagectl.toolkit import DISTRO_PYTHON
from tests.supply.tiny_wheels import tiny_index
from tests.support import ROOT


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    return tiny_index(tmp_path_factory.mktemp("tiny"))


def _spec(tmp_path, index: str, pythons=("3.10", "3.11")) -> LockSpec:
    return LockSpec(
        path=tmp_path / "test.lock",
        title="tiny",
        command="test",
        requirements=("alpha>=0.5",),
        index_url=index,
        pythons=pythons,
        platforms=("manylinux2014_x86_64",),
    )


def test_lock_pins_every_wheel_each_target_needs(tmp_path, index) -> None:
    # Expected from the index's metadata: alpha 1.0 (newest in range), beta 2.1 for both,
    # gamma only where python_version < "3.11" holds, i.e. 3.10: even though this
    # controller's own Python (3.11) would drop it.
    lock = make_lock(_spec(tmp_path, index))
    got = {(e.name, e.version, e.pythons) for e in lock.entries}
    assert got == {("alpha", "1.0", ()), ("beta", "2.1", ()), ("gamma", "1.4", ("3.10",))}
    assert all(len(e.hashes) == 1 and len(e.hashes[0]) == 64 for e in lock.entries)
    text = lock.render()
    assert 'gamma==1.4 ; python_version == "3.10" \\\n    --hash=sha256:' in text
    assert "gamma" not in lock.for_python("3.11")
    assert "python_version" not in lock.for_python("3.10")


def test_regeneration_is_deterministic_and_round_trips(tmp_path, index) -> None:
    spec = _spec(tmp_path, index)
    first = write_lock(spec).read_bytes()
    assert write_lock(spec).read_bytes() == first
    lock = load(spec.path)
    assert lock.render().encode() == first
    assert is_current(spec)
    assert not is_current(_spec(tmp_path, index, pythons=("3.10", "3.11", "3.12")))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alpha==1.0\n", "not an imagectl lock"),
        ("# imagectl lock: x\nalpha>=1.0 --hash=sha256:" + "a" * 64 + "\n", "not pinned with =="),
        ("# imagectl lock: x\nalpha==1.0\n", "has no --hash"),
        ("# imagectl lock: x\nalpha==1.0 --hash=md5:abc\n", "is not a sha256 hash"),
        (
            "# imagectl lock: x\nalpha==1.0 ; sys_platform == 'win32' --hash=sha256:"
            + "a" * 64
            + "\n",
            "only python_version == markers",
        ),
    ],
)
def test_a_malformed_lock_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse(text, where="x.lock")


def test_committed_validator_lock_matches_pyproject() -> None:
    """validators/requirements.lock was made from pyproject's [project].dependencies for
    every distribution Python an image has; every dependency is pinned inside its range on
    every target. Regenerate with: python -m imagectl.supply.lock validator."""
    spec = validator_spec(find_workspace(ROOT))
    lock = load(spec.path)
    assert is_current(spec), "stale: run python -m imagectl.supply.lock validator and commit"
    assert set(lock.pythons) == set(DISTRO_PYTHON.values())
    for python in lock.pythons:
        pinned: dict[str, LockEntry] = {}
        for e in lock.entries:
            if e.applies_to(python):
                assert e.name not in pinned, f"{e.name} pinned twice for {python}"
                pinned[e.name] = e
        for dep in spec.requirements:
            req = Requirement(dep)
            entry = lock.entry(req.name) if req.name else None
            entry = pinned.get(entry.name) if entry else None
            assert entry is not None, f"{req.name} not locked for Python {python}"
            assert req.specifier.contains(entry.version, prereleases=True), (python, dep)


def test_committed_installer_lock_pins_pip_for_every_target() -> None:
    """validators/installer.lock: the pip the offline bundle carries (imagectl bundle), one
    hashed wheel every target Python installs with. Regenerate with: python -m
    imagectl.supply.lock installer."""
    from imagectl.supply.lock import installer_spec

    spec = installer_spec(find_workspace(ROOT))
    lock = load(spec.path)
    assert is_current(spec), "stale: run python -m imagectl.supply.lock installer and commit"
    assert set(lock.pythons) == set(DISTRO_PYTHON.values())
    assert [e.name for e in lock.entries] == ["pip"] and lock.entries[0].hashes
    assert not lock.entries[0].pythons, "one pip for every target"
