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

from tests.support import flat

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


# What a validator-only install (a fleet node, the image's /opt/imagectl) does not have:
# the "controller" extra and every other extra (pyproject.toml).
NOT_ON_A_GPU_HOST = (
    "sqlalchemy", "alembic", "jinja2", "ansible", "ansible_runner", "boto3",
    "botocore", "google", "azure", "psycopg", "torch",
)  # fmt: skip

BLOCKER = f"""
import importlib.abc, sys
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {NOT_ON_A_GPU_HOST!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.mark.slow
def test_a_validator_only_install_validates_and_sends_controller_commands_away(
    tmp_path: Path,
) -> None:
    """The wheel's own requirements hold no controller or cloud package, and with only
    those present the validator runs a whole validation; a controller command is one
    paragraph naming the extra to install, exit 2 (never a traceback)."""
    import zipfile

    from imagectl.packer.build import build_validator_wheel
    from imagectl.paths import Workspace

    dist = tmp_path / "dist"
    build_validator_wheel(Workspace(root=REPO, images=REPO / "images"), dist)
    [wheel] = list(dist.glob("imagectl-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in zf.read(meta).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    core = {r.split(";")[0].split(">")[0].split("=")[0].strip().lower() for r in requires
            if "extra ==" not in r}  # fmt: skip
    assert not core & {"sqlalchemy", "alembic", "boto3", "ansible-core", "torch"}, core

    python = fresh_venv(tmp_path / "venv")
    pip(python, str(wheel))
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    (site / "_not_installed.py").write_text(BLOCKER)
    (site / "aaa_not_installed.pth").write_text("import _not_installed\n")
    cli = tmp_path / "venv" / "bin" / "imagectl"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    snapshots = REPO / "tests" / "snapshots"
    done = subprocess.run(
        [
            str(cli),
            "validate",
            "--profile",
            "boot",
            "--replay",
            str(snapshots / "healthy" / "h100-sxm-8x.json"),
            "--expect",
            str(snapshots / "expect" / "h100-sxm-8x.json"),
            "-o",
            str(tmp_path / "receipt.json"),
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "IMAGECTL_STATE_DIR": str(tmp_path / "state")},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert '"verdict": "pass"' in (tmp_path / "receipt.json").read_text()
    # The shape's hardware and the GPU catalogue (what --shape and the CUDA smoke test's
    # device-property check read on a GPU host) load there too.
    done = subprocess.run(
        [
            str(python),
            "-c",
            "from imagectl.validators.expectations import hardware_for\n"
            "from imagectl.paths import bundled_images\n"
            "hw = hardware_for(bundled_images(), 'p5.48xlarge')[1]\n"
            "print(int(hw.memory_gib), hw.nvlink_links)",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "IMAGECTL_STATE_DIR": str(tmp_path / "state")},
    )
    assert done.returncode == 0 and done.stdout.split() == ["80", "18"], done.stderr[-3000:]
    done = subprocess.run(
        [str(cli), "status"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "IMAGECTL_STATE_DIR": str(tmp_path / "state")},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "imagectl[controller]" in flat(done.stderr) and "Traceback" not in flat(done.stderr)
