"""A folder a ``.pth`` adds that others can change is refused when imagectl runs, not only
at install (``imagectl.core.sitetrust``, through ``trustpath.refusal``).

A real venv (``python -m venv --without-pip``) sees imagectl as the toolkit venv does
(``validators.toolkit_venv``: a ``.pth`` line ``import site; site.addsitedir(...)`` naming
this checkout's site-packages); a hostile ``.pth`` is then planted beside it, naming a
folder others can write (or another user owns), as a loose ``install.sh
--host-site-packages`` folder would be after a later chmod. The real entry point runs in
that venv: exit 2 naming the folder and the fix, and no command ran."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support import flat

ENTRY = "import sys; from imagectl.cli.common import entrypoint; entrypoint()"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pthvenv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip())  # fmt: skip
    ours = sysconfig.get_paths()["purelib"]
    (site / "imagectl-validator.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python, site


def _run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([str(python), "-c", ENTRY, *args], capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip


@pytest.mark.parametrize("loose", ["writable by others", "owned by another user", "addsitedir"])
def test_a_hostile_pth_target_is_refused_at_run_time(venv, tmp_path: Path, loose: str) -> None:
    python, site = venv
    assert _run(python, "--version").returncode == 0  # the control: a clean venv runs
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "json_tools.py").write_text("raise SystemExit('planted code ran')\n")
    planted = site / "zz-hostile.pth"
    if loose == "owned by another user":
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(hostile, 65534, 65534)
    else:
        hostile.chmod(0o777)
    line = f"import site; site.addsitedir({str(hostile)!r})" if loose == "addsitedir" else str(
        hostile)  # fmt: skip
    planted.write_text(line + "\n")
    try:
        proc = _run(python, "--version")
    finally:
        planted.unlink()
    err = flat(proc.stderr)
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert "Traceback" not in err and "planted code ran" not in err
    assert str(hostile) in err and "zz-hostile.pth" in err, err
    fix = "chown" if loose == "owned by another user" else "chmod go-w"
    assert fix in err and "no command was run" in err, err


def test_a_pth_file_others_can_write_is_refused(venv, tmp_path: Path) -> None:
    python, site = venv
    planted = site / "zz-loose.pth"
    planted.write_text("# nothing yet\n")
    planted.chmod(0o666)
    try:
        proc = _run(python, "--version")
    finally:
        planted.unlink()
    err = flat(proc.stderr)
    assert proc.returncode == 2 and str(planted) in err and "chmod go-w" in err, err
