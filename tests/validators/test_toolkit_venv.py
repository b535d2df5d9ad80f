"""``imagectl validate --toolkit-wheelhouse FILE`` on the host: the wheelhouse is the
controller's (``imagectl.supply``: wheels and the requirements.lock pinning each by
sha256); what reaches the host with other bytes is refused by pip's hash check and
nothing is left behind. The install-and-run path itself is exercised end to end by
tests/clouds/test_validation_toolkit.py."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from imagectl.supply.lock import LockSpec, toolkit_requirement, write_lock
from imagectl.supply.targets import PLATFORMS
from imagectl.supply.wheelhouse import ensure_wheelhouse
from tests.clouds.scenario import HEALTHY
from tests.support import fake_torch_wheel, simple_index

PYTHON = "3.11"  # this test environment's interpreter: the host's python3 here


def _wheelhouse(tmp_path: Path) -> Path:
    url = simple_index(tmp_path / "index", [fake_torch_wheel(tmp_path / "wheels")])
    spec = LockSpec(
        path=tmp_path / "toolkit.lock", title="stand-in toolkit", command="test",
        requirements=(toolkit_requirement("2.9.1", "cu128"),), index_url=url,
        pythons=(PYTHON,), platforms=PLATFORMS,
    )  # fmt: skip
    return ensure_wheelhouse(
        write_lock(spec), python=PYTHON, platforms=PLATFORMS, folder=tmp_path / "made",
        index_url=url,
    )  # fmt: skip


def _rewrite(tarball: Path, dest: Path, change: dict[str, bytes]) -> Path:
    """The tarball with some members' bytes replaced (or added)."""
    with tarfile.open(tarball) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    members.update(change)
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / tarball.name
    with tarfile.open(out, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def _validate(cli: Any, tarball: Path) -> Any:
    return cli(
        "validate", "--profile", "quick", "--stack", "h100-training", "--shape", "p5.48xlarge",
        "--replay", str(HEALTHY), "--toolkit-wheelhouse", str(tarball), "--json",
    )  # fmt: skip


def test_a_wheel_changed_on_its_way_to_the_host_is_refused(cli: Any, tmp_path: Path) -> None:
    made = _wheelhouse(tmp_path)
    with tarfile.open(made) as tar:
        (wheel,) = [n for n in tar.getnames() if n.endswith(".whl")]
    # same name and version, other bytes (a torch/version.py naming another CUDA)
    other = fake_torch_wheel(tmp_path / "other", cuda="12.6").read_bytes()
    shipped = _rewrite(made, tmp_path / "host", {wheel: other})
    result = _validate(cli, shipped)
    assert result.code == 2, result.out + result.err
    assert result.out == ""  # no receipt: nothing was validated
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in " ".join(result.err.split())
    assert sorted(p.name for p in shipped.parent.iterdir()) == [shipped.name]  # no venv left


def test_a_wheelhouse_with_a_path_in_it_is_refused(cli: Any, tmp_path: Path) -> None:
    shipped = _rewrite(_wheelhouse(tmp_path), tmp_path / "host", {"../escape.whl": b"x"})
    result = _validate(cli, shipped)
    assert result.code == 2, result.out + result.err
    told = " ".join(result.err.split())  # the paragraph is wrapped to the terminal
    assert "'../escape.whl'" in told and "flat regular files only" in told
    assert not (tmp_path / "escape.whl").exists()
    assert sorted(p.name for p in shipped.parent.iterdir()) == [shipped.name]


def test_a_missing_wheelhouse_is_exit_2(cli: Any, tmp_path: Path) -> None:
    result = _validate(cli, tmp_path / "nowhere.tar")
    assert result.code == 2
    assert "does not exist" in result.err


def test_the_toolkit_is_installed_without_byte_compiling_it(tmp_path: Path) -> None:
    """A venv for one run: pip's default byte-compiles every module of the wheels (torch
    has thousands, most never imported); under emulation that cost minutes per node. Python
    compiles what a run imports, when it imports it."""
    from imagectl.validators.toolkit_venv import toolkit_venv

    with toolkit_venv(_wheelhouse(tmp_path)) as installed:
        site = next(Path(installed.venv).glob("lib/python3*/site-packages"))
        modules = list(site.glob("torch/**/*.py"))
        assert modules, sorted(p.name for p in site.iterdir())  # the toolkit is there
        assert list(site.rglob("*.pyc")) == []
    assert not Path(installed.venv).exists()


def test_collectives_installs_the_toolkit_it_is_given_and_checks_it_first(
    cli: Any, tmp_path: Path
) -> None:
    """``collectives --toolkit-wheelhouse`` (the fabric playbook's node command) goes
    through the same venv as validate's: a wheel that differs from its lock is refused by
    pip's hash check before any rank starts, and no venv is left."""
    made = _wheelhouse(tmp_path)
    with tarfile.open(made) as tar:
        (wheel,) = [n for n in tar.getnames() if n.endswith(".whl")]
    other = fake_torch_wheel(tmp_path / "other", cuda="12.6").read_bytes()
    shipped = _rewrite(made, tmp_path / "host", {wheel: other})
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 slots=2\n")
    result = cli("collectives", "--nodes", str(hosts), "--device", "cpu",
                 "--toolkit-wheelhouse", str(shipped))  # fmt: skip
    assert result.code == 2, result.out + result.err
    assert result.out == ""  # no rank ran, no JSON
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in " ".join(result.err.split())
    assert sorted(p.name for p in shipped.parent.iterdir()) == [shipped.name]
