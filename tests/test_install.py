"""Both install modes work: a wheel (what a GPU host gets) and an editable checkout.

Each test makes a fresh virtual environment, installs imagectl into it, and borrows
third-party dependencies from the test interpreter through a .pth line (no network).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def module_names() -> list[str]:
    names = []
    for folder, package in (("pipeline", "imagectl"), ("validators", "imagectl.validators")):
        base = REPO / folder
        for py in sorted(base.rglob("*.py")):
            rel = py.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if "migrations" in parts and "versions" not in parts and parts[-1:] == ["env"]:
                continue  # alembic's env.py runs only inside alembic
            names.append(".".join([package, *parts]))
    return names


def fresh_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    site = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    Path(site, "borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def pip(python: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", *args],
        check=True,
        cwd=REPO,
    )


def run(python: Path, code: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def import_all(python: Path, cwd: Path) -> dict[str, str]:
    names = module_names()
    code = (
        "import importlib, json\n"
        f"names = {names!r}\n"
        "files = {n: importlib.import_module(n).__file__ for n in names}\n"
        "print(json.dumps(files))\n"
    )
    import json

    return json.loads(run(python, code, cwd))


@pytest.mark.slow
def test_wheel_install(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    from imagectl.packer.build import build_validator_wheel
    from imagectl.paths import Workspace

    # The same builder the validator role uses (serialised per source tree).
    build_validator_wheel(Workspace(root=REPO, images=REPO / "images"), dist)
    [wheel] = list(dist.glob("imagectl-*.whl"))
    python = fresh_venv(tmp_path / "venv")
    pip(python, str(wheel))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    files = import_all(python, elsewhere)
    assert all(str(tmp_path / "venv") in f for f in files.values()), files
    assert files["imagectl.validators"].endswith("imagectl/validators/__init__.py")
    # Data ships in the wheel: lint and compat work with no checkout around.
    cli = tmp_path / "venv" / "bin" / "imagectl"
    done = subprocess.run(
        [str(cli), "lint", "--json"], cwd=elsewhere, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        [str(cli), "compat", "check", "--driver", "580.95.05", "--cuda", "13.0", "--gpu", "B200"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_editable_install(tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    pip(python, "-e", str(REPO))
    files = import_all(python, tmp_path)
    assert files["imagectl"] == str(REPO / "pipeline" / "__init__.py")
    assert files["imagectl.validators"] == str(REPO / "validators" / "__init__.py")
    assert files["imagectl.stacks.schema"] == str(REPO / "pipeline" / "stacks" / "schema.py")
