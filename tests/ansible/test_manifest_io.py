"""The manifest role's two writers share one module, installed beside them by the role.

write-manifest and write-inventory run on the image with the standard library only;
``files/manifest_io.py`` holds what they share (running a command, writing the JSON whole
or not at all). The tests install the three files as ``tasks/install.yml`` names them
(the writers without their ``.py``, in one folder) and run them there, with dpkg-query
and modinfo standing in as the image has them (dpkg-query(1) -W -f, modinfo(8) -F).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "playbooks" / "roles" / "manifest"
FILES = ROLE / "files"
WRITERS = ("write-manifest.py", "write-inventory.py")


def _installed(tmp_path: Path) -> dict[str, Path]:
    """The role's install task, file by file: source name -> the installed path."""
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    (copy,) = [t for t in tasks if "ansible.builtin.copy" in t]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    folder = tmp_path / "libexec"
    folder.mkdir()
    names = {
        "{{ manifest_tool }}": Path(defaults["manifest_tool"]).name,
        "{{ manifest_inventory_tool }}": Path(defaults["manifest_inventory_tool"]).name,
        "{{ manifest_tool | dirname }}/manifest_io.py": "manifest_io.py",
    }
    installed = {}
    for item in copy["loop"]:
        target = folder / names[item["dest"]]
        target.write_bytes((FILES / item["src"]).read_bytes())
        target.chmod(int(item["mode"], 8))
        installed[item["src"]] = target
    return installed


def _stand_ins(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        # both writers' formats: (status, package, version) and the inventory's six fields
        "dpkg-query": (
            'case "$*" in *Status}*) exit 0;; *source:Package*) '
            "printf 'ii \\tbash\\t5.2.15-2\\tbash\\t5.2.15-2\\tamd64\\n';; "
            "*) printf 'ii \\tnvidia-driver-580-open\\t580.95.05-0ubuntu1\\n';; esac\n"
        ),
        "modinfo": 'case "$*" in *" nvidia") echo 580.95.05;; *) exit 1;; esac\n',
        "apt-get": "exit 100\n",
    }
    for name, body in tools.items():
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n" + body)
        tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_the_role_installs_the_shared_module_beside_both_writers(tmp_path: Path) -> None:
    installed = _installed(tmp_path)
    assert set(installed) == {*WRITERS, "manifest_io.py"}
    assert {p.parent for p in installed.values()} == {tmp_path / "libexec"}
    assert stat.S_IMODE(installed["manifest_io.py"].stat().st_mode) == 0o644


@pytest.mark.parametrize("writer", WRITERS)
def test_each_writer_runs_from_the_installed_folder_and_writes_its_file(
    tmp_path: Path, writer: str
) -> None:
    installed = _installed(tmp_path)
    env = _stand_ins(tmp_path)
    args = {
        "write-manifest.py": ["--stack", "s", "--digest", "d" * 64, "--cloud", "aws"],
        "write-inventory.py": [],
    }[writer]
    out = tmp_path / "etc" / "out.json"
    out.parent.mkdir()
    argv = [sys.executable, str(installed[writer]), *args, "--kernel", "6.8.0-1039-aws",
            "--validator-venv", str(tmp_path), "--output", str(out)]  # fmt: skip
    first = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    assert first.stdout == "changed\n"
    document = json.loads(out.read_text())
    assert document["kernel"] == "6.8.0-1039-aws"
    if writer == "write-manifest.py":
        assert document["driver"] == "580.95.05"
        assert document["packages"] == {"nvidia-driver-580-open": "580.95.05-0ubuntu1"}
    else:  # apt-get answers nothing: no hashes; no modinfo field but version: no module
        assert [p["name"] for p in document["dpkg"]] == ["bash"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert not list(out.parent.glob("*.tmp"))
    again = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    assert again.stdout == "unchanged\n"
    assert json.loads(out.read_text()) == document


def _manifest_io() -> ModuleType:
    spec = importlib.util.spec_from_file_location("manifest_io", FILES / "manifest_io.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_missing_program_raises_unless_missing_ok(tmp_path: Path) -> None:
    io = _manifest_io()
    absent = str(tmp_path / "no-such-program")
    with pytest.raises(FileNotFoundError):
        io.run([absent])
    assert io.run([absent], missing_ok=True) == (127, "")
    assert io.run([sys.executable, "-c", "print('x'); raise SystemExit(3)"]) == (3, "x\n")


def test_emit_without_output_prints_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    _manifest_io().emit({"b": 1, "a": [2]}, "")
    assert capsys.readouterr().out == json.dumps({"a": [2], "b": 1}, indent=2) + "\n"


@pytest.mark.parametrize("writer", WRITERS)
def test_neither_writer_keeps_its_own_copy_of_the_shared_functions(writer: str) -> None:
    tree = ast.parse((FILES / writer).read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    shared = {n.name for n in ast.parse((FILES / "manifest_io.py").read_text()).body
              if isinstance(n, ast.FunctionDef)}  # fmt: skip
    assert shared == {"run", "emit"}
    assert not defined & shared
