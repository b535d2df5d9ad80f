"""The offline validator bundle (``imagectl bundle``): made by the real command
from the real lock and PyPI's wheels, installed by its own script into a fresh venv with no
index reachable, and refused whole when a file was changed, the Python is wrong or the
platform has no wheel. The GPU check script runs end to end from it on the CPU."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagectl.paths import find_workspace
from imagectl.supply.bundle import Bundle, make_bundle
from tests.support import flat

REPO = Path(__file__).resolve().parents[2]
PYTHON = "{}.{}".format(*sys.version_info[:2])
REAL = REPO / "tests" / "snapshots" / "real" / "h200-1x-2026-11-28.json"
NO_INDEX = {"PIP_INDEX_URL": "http://127.0.0.1:9/unreachable", "PIP_FIND_LINKS": ""}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bundle]:
    tmp = tmp_path_factory.mktemp("bundle")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IMAGECTL_CACHE_DIR", str(tmp / "cache"))
        made = make_bundle(find_workspace(str(REPO)), python=PYTHON, out=tmp / "b.tar.gz")
    print(f"bundle for Python {PYTHON}: {made.size / 1e6:.1f} MB, {len(made.files)} files")
    yield made


def _unpack(bundle: Bundle, dest: Path) -> Path:
    with tarfile.open(bundle.path) as tar:
        tar.extractall(dest, filter="data")
    return dest / bundle.folder


def _install(folder: Path, prefix: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(folder / "install.sh"), "--python", sys.executable, "--prefix", str(prefix),
         *extra],
        capture_output=True, text=True, check=False, env={**os.environ, **NO_INDEX},
    )  # fmt: skip


def test_bundle_json_describes_the_bundle_it_wrote(bundle: Bundle, tmp_path: Path) -> None:
    """``bundle --json``: the bundle it wrote, as data (path, its sha256 and size, the
    Python and platforms, every file, the install line), from the fixture's download cache
    with no package index reachable; without --json the same facts as text."""
    env = {**os.environ, **NO_INDEX, "IMAGECTL_CACHE_DIR": str(bundle.path.parent / "cache")}
    out = tmp_path / "again.tar.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "imagectl", "bundle", "--python", PYTHON, "-o", str(out), "--json"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["path"] == str(out) and doc["python"] == PYTHON
    assert doc["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert doc["bytes"] == out.stat().st_size
    assert sorted(doc["files"]) == sorted(bundle.files)
    assert "install.sh" in doc["install"]
    text = subprocess.run(
        [sys.executable, "-m", "imagectl", "bundle", "--python", PYTHON, "-o", str(out)],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    # the file it wrote this time (the tarball is not byte-reproducible: gzip's mtime)
    again = hashlib.sha256(out.read_bytes()).hexdigest()
    assert text.returncode == 0 and f"sha256: {again}" in flat(text.stdout), text.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.stdout)


def test_the_bundle_is_small_and_carries_no_torch(bundle: Bundle) -> None:
    names = list(bundle.files)
    wheels = [n for n in names if n.startswith("wheels/")]
    assert any(n.startswith("wheels/imagectl-") for n in wheels)
    assert any(
        n.startswith("wheels/pydantic_core-") and f"cp{PYTHON.replace('.', '')}" in n
        for n in wheels
    )
    cuda = [n for n in wheels if n.startswith(("wheels/torch-", "wheels/nvidia_cu"))]
    assert cuda == [], "torch and CUDA come from the host"
    assert not any(n.startswith(("wheels/pytest", "wheels/pytest_testinfra")) for n in wheels)
    assert bundle.size < 20e6, bundle.size  # about 8 MB without torch
    lock = None
    with tarfile.open(bundle.path) as tar:
        member = tar.extractfile(f"{bundle.folder}/requirements.lock")
        assert member is not None
        lock = member.read().decode()
    # every wheel of the bundle is pinned by its sha256 in the lock pip installs from
    for name in wheels:
        assert f"--hash=sha256:{bundle.files[name]}" in lock, name


def test_it_installs_with_no_index_and_runs_a_replayed_validation(bundle, tmp_path) -> None:
    folder = _unpack(bundle, tmp_path)
    prefix = tmp_path / "venv"
    proc = _install(folder, prefix, "--host-site-packages")
    assert proc.returncode == 0, proc.stderr
    python = prefix / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import imagectl as i, pydantic as p; print(i.__file__, p.__file__)"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert where.count(str(prefix)) == 2, where  # the bundle's own copies, not the host's
    replay = subprocess.run(
        [str(prefix / "bin" / "imagectl"), "validate", "--replay", str(REAL), "--gpu",
         "H200-SXM-141GB", "--gpu-count", "1", "--profile", "quick", "--no-hygiene", "--json"],
        capture_output=True, text=True, check=False, env={**os.environ, **NO_INDEX},
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["verdict"] == "pass"
    record = json.loads((prefix / "imagectl-bundle.json").read_text())
    assert record["python"] == PYTHON and "files" not in record
    # a fleet host's validator carries no test runner
    listed = {
        p.name.split("-")[0].lower()
        for p in (prefix / "lib").glob("python*/site-packages/*.dist-info")
    }
    assert not listed & {"pytest", "pluggy", "iniconfig", "pytest_testinfra"}, listed


def _refused(proc: subprocess.CompletedProcess[str], prefix: Path, *words: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert not prefix.exists(), "nothing half-installed"
    assert "Traceback" not in flat(proc.stderr)
    for word in words:
        assert word in proc.stderr, proc.stderr


def test_a_changed_wheel_is_refused_before_anything_is_written(bundle, tmp_path) -> None:
    folder = _unpack(bundle, tmp_path)
    wheel = next((folder / "wheels").glob("click-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    prefix = tmp_path / "venv"
    _refused(_install(folder, prefix), prefix, wheel.name, "changed after the bundle was made")


def test_a_changed_wheel_with_a_forged_manifest_is_refused_by_pip(bundle, tmp_path) -> None:
    """The manifest rewritten to match: pip's --require-hashes against the lock still refuses."""
    folder = _unpack(bundle, tmp_path)
    wheel = next((folder / "wheels").glob("click-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    manifest = json.loads((folder / "BUNDLE.json").read_text())
    import hashlib

    manifest["files"][f"wheels/{wheel.name}"] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (folder / "BUNDLE.json").write_text(json.dumps(manifest))
    prefix = tmp_path / "venv"
    _refused(_install(folder, prefix), prefix, "DO NOT MATCH THE HASHES")


def test_an_added_or_missing_file_is_refused(bundle, tmp_path) -> None:
    folder = _unpack(bundle, tmp_path)
    (folder / "wheels" / "evil-1.0-py3-none-any.whl").write_bytes(b"PK")
    prefix = tmp_path / "venv"
    _refused(
        _install(folder, prefix), prefix, "evil-1.0-py3-none-any.whl", "not part of the bundle"
    )
    (folder / "wheels" / "evil-1.0-py3-none-any.whl").unlink()
    next((folder / "wheels").glob("rich-*.whl")).unlink()
    _refused(_install(folder, prefix), prefix, "missing from the bundle")


PLANTED = "import pathlib; pathlib.Path({marker!r}).write_text('ran')\n"
TAG = sys.implementation.cache_tag  # cpython-3XY


def _plant(folder: Path, name: str, marker: Path) -> None:
    """``name`` in the bundle's folder, made to write ``marker`` when Python runs it."""
    import py_compile

    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    source = PLANTED.format(marker=str(marker))
    if name.endswith(".py") or name.endswith(".pth"):
        path.write_text(("import os; " + source) if name.endswith(".pth") else source)
        return
    src = folder.parent / f"{path.stem}-source.py"
    src.write_text(source)
    # a __pycache__ entry with an unchecked hash is run in place of its source, unread
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(src), cfile=str(path), doraise=True, invalidation_mode=mode)
    src.unlink()


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("json.py", "install.sh"),  # a standard library name beside install.py
        ("json.py", "python install.py"),  # run directly, not through install.sh
        ("hashlib.pyc", "install.sh"),  # sourceless bytecode (was never checked)
        (f"__pycache__/trustpath.{TAG}.pyc", "install.sh"),  # bytecode for a listed .py
        ("wheels/evil.pth", "install.sh"),
    ],
)
def test_a_planted_module_is_refused_before_it_runs(bundle, tmp_path, name, how) -> None:
    """Every file of the folder is checked before any Python of the bundle is imported or
    run: the planted file is named, and the side effect it would have had never happens."""
    folder = _unpack(bundle, tmp_path)
    marker = tmp_path / "planted-code-ran"
    _plant(folder, name, marker)
    prefix = tmp_path / "venv"
    if how == "install.sh":
        proc = _install(folder, prefix, "--host-site-packages")
    else:
        proc = subprocess.run(
            [sys.executable, str(folder / "install.py"), "--prefix", str(prefix),
             "--host-site-packages"],
            capture_output=True, text=True, check=False, cwd=folder,
            env={**os.environ, **NO_INDEX, "PYTHONPATH": str(folder)},
        )  # fmt: skip
    assert not marker.exists(), "the planted file ran"
    _refused(proc, prefix, name, "not part of the bundle", "nothing of it was run")


@pytest.mark.parametrize("loose", ["site-packages", "lib"])
def test_host_site_packages_others_can_write_are_refused(bundle, tmp_path, loose) -> None:
    """--host-site-packages writes the interpreter's site-packages into the venv's .pth:
    a folder there (or above it) others can write is refused, naming it and the fix."""
    host = tmp_path / "host"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(host)], check=True)
    site = next((host / "lib").glob("python3.*/site-packages"))
    loosened = site if loose == "site-packages" else host / "lib"
    loosened.chmod(0o777)
    folder = _unpack(bundle, tmp_path)
    prefix = tmp_path / "venv"
    proc = subprocess.run(
        ["sh", str(folder / "install.sh"), "--python", str(host / "bin" / "python"),
         "--prefix", str(prefix), "--host-site-packages"],
        capture_output=True, text=True, check=False, env={**os.environ, **NO_INDEX},
    )  # fmt: skip
    flat = " ".join(proc.stderr.split())
    _refused(proc, prefix, "host site-packages folder")
    assert f"{loosened}" in flat and "writable by others (mode 0777)" in flat, flat
    assert f"chmod go-w {loosened}" in flat, flat


def test_the_wrong_python_is_refused_naming_both(bundle, tmp_path) -> None:
    folder = _unpack(bundle, tmp_path)
    manifest: dict[str, Any] = json.loads((folder / "BUNDLE.json").read_text())
    manifest["python"] = "3.12" if PYTHON != "3.12" else "3.11"
    (folder / "BUNDLE.json").write_text(json.dumps(manifest))
    prefix = tmp_path / "venv"
    proc = _install(folder, prefix)
    _refused(
        proc, prefix, f"this bundle is for Python {manifest['python']}", f"is Python {PYTHON}",
        f"imagectl bundle --python {PYTHON}",
    )  # fmt: skip
    assert "\n" not in proc.stderr.strip(), "one paragraph"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--python", "3.9"], ["needs Python 3.10 or newer"]),
        (["--python", "3.14"], ["pins wheels for Python 3.10, 3.11, 3.12 only"]),
        (["--python", "three"], ["is not a Python version"]),
        (  # a Grace host (GH200, GB200): the lock pins x86_64 wheels only
            ["--python", PYTHON, "--platform", "manylinux_2_28_aarch64"],
            [
                "--platform manylinux_2_28_aarch64: requirements.lock pins wheels",
                "for manylinux_2_28_x86_64,",
                "nothing was downloaded",
                "imagectl.supply.targets.PLATFORMS",
            ],
        ),
    ],
)
def test_the_bundle_command_refuses_what_it_cannot_make(tmp_path, argv, words) -> None:
    """Refused before any download: no package index is reachable here."""
    out = tmp_path / "b.tar.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "imagectl", "bundle", *argv, "-o", str(out)],
        capture_output=True, text=True, check=False, env={**os.environ, **NO_INDEX},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in flat(proc.stderr)
    for word in words:
        assert word in " ".join(proc.stderr.split()), proc.stderr
    assert not out.exists() and not list(tmp_path.glob(".*partial"))


def test_an_installed_imagectl_says_what_bundle_needs(tmp_path) -> None:
    """An imagectl installed from its wheel has the locks (package data) but no source tree
    to build its own wheel from: exit 2 before any download, naming what it needs, and the
    hint is not the command that just failed."""
    installed = tmp_path / "site-packages" / "imagectl"
    shutil.copytree(REPO / "validators", installed / "validators",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    out = tmp_path / "b.tar.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "imagectl", "bundle", "--python", PYTHON, "-o", str(out)],
        capture_output=True, text=True, check=False,
        env={**os.environ, **NO_INDEX, "IMAGECTL_ROOT": str(installed)},
    )  # fmt: skip
    text = " ".join(proc.stderr.split())
    assert proc.returncode == 2, proc.stderr
    assert f"{installed} is an installed imagectl" in text and "no pyproject.toml" in text
    assert "Run it in a checkout of imagectl" in text and "$IMAGECTL_ROOT" in text, text
    assert "imagectl bundle --python" not in text and "pip wheel" not in text, text
    assert not out.exists()


def test_the_gpu_check_runs_end_to_end_on_the_cpu(bundle, tmp_path) -> None:
    """benchmarks/gpu_check.py --device cpu: the bundle installed offline, validate, the
    local collectives, snapshot, figures; the same script a GPU host runs."""
    if shutil.which("sh") is None:
        pytest.skip("no sh")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--bundle", str(bundle.path),
         "--out", str(out), "--device", "cpu", "--python", sys.executable],
        capture_output=True, text=True, check=False, env={**os.environ, **NO_INDEX},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {p.name for p in out.iterdir()} == {
        "receipt.json", "junit.xml", "collectives.json", "snapshot.json", "figures.json",
        "gpu-check.log",
    }  # fmt: skip
    figures = json.loads((out / "figures.json").read_text())
    assert figures["verdict"] == "pass" and figures["device"] == "cpu"
    assert figures["toolkit"]["source"] == "host"
    assert figures["gemm_bf16_tflops"] > 0 and figures["hbm_copy_gbps"] > 0
    assert figures["collectives"]["ranks"] == 2
    assert figures["collectives"]["checks"]["collective.all_reduce"]["outcome"] == "pass"
    assert "verdict: pass" in flat(proc.stdout) and "gemm_bf16_tflops" in flat(proc.stdout)
