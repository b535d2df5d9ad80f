"""A lean image (``validation.toolkit.install: at-validation``, the default) carries no GPU
toolkit, and its manifest says so: the build hands the validator role no toolkit, and the
manifest role's writer (playbooks/roles/manifest/files/write-manifest.py, ground truth from
the validator venv's files) records none. A baked stack's image still records it.

The writer runs for real on a venv laid out as the validator role leaves one; dpkg-query
and modinfo stand in on PATH as the image has them (dpkg-query(1) -W -f, modinfo(8) -F).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from imagectl.packer.variables import ansible_vars
from imagectl.paths import find_workspace
from imagectl.stacks import load_resolved
from imagectl.stacks.resolve import stack_digest
from imagectl.validators.manifest import parse_manifest
from tests.support import ROOT, fake_torch_wheel

WRITER = ROOT / "playbooks" / "roles" / "manifest" / "files" / "write-manifest.py"
ROLE_TASKS = ROOT / "playbooks" / "roles" / "validator" / "tasks" / "main.yml"


@pytest.fixture(scope="module")
def h100() -> Any:
    return load_resolved(find_workspace().images, "h100-training")[1]


def _baked(resolved: Any) -> Any:
    stack = resolved.stack
    toolkit = stack.validation.toolkit.model_copy(update={"install": "bake"})
    validation = stack.validation.model_copy(update={"toolkit": toolkit})
    return dataclasses.replace(resolved, stack=stack.model_copy(update={"validation": validation}))


def _venv(folder: Path, *, torch: bool) -> Path:
    """A validator venv; with ``torch``, the stand-in toolkit installed into it offline."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    if torch:
        (site,) = folder.glob("lib/python3*/site-packages")
        wheel = fake_torch_wheel(folder.parent / "wheels")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
             "--target", str(site), str(wheel)],
            check=True,
        )  # fmt: skip
    return folder


def _manifest(venv: Path, tmp_path: Path) -> Any:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in {
        "dpkg-query": 'case "$*" in *Status}*) exit 0;; esac\n'
        "printf 'hi \\tnvidia-driver-580-open\\t580.95.05-0ubuntu1\\n'\n",
        "modinfo": 'case "$*" in *version*) echo 580.95.05;; '
        '*license*) echo "Dual MIT/GPL";; esac\n',
    }.items():
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n" + body)
        tool.chmod(0o755)
    done = subprocess.run(
        [sys.executable, str(WRITER), "--stack", "h100-training", "--digest", "d" * 64,
         "--cloud", "aws", "--kernel", "6.8.0-1039-aws", "--validator-venv", str(venv),
         "--pattern=nvidia-*", "--component=driver=nvidia-driver-580-open"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )  # fmt: skip
    return parse_manifest(json.loads(done.stdout))


def test_a_lean_stack_s_build_installs_no_toolkit_and_its_manifest_lists_none(
    h100: Any, tmp_path: Path
) -> None:
    avars = ansible_vars(h100, "aws")
    # the validator role's toolkit block runs only when it is given a torch to install
    assert "when: validator_toolkit_torch | length > 0" in ROLE_TASKS.read_text()
    assert (avars["validator_toolkit_torch"], avars["validator_toolkit_wheelhouse"]) == ("", "")
    manifest = _manifest(_venv(tmp_path / "opt-imagectl", torch=False), tmp_path)
    assert manifest.driver == "580.95.05"  # the writer really read the image
    assert manifest.validator_toolkit is None
    # the expectations still pin the toolkit: the compatibility rules and the validation
    # run (which brings it) judge it as before
    assert avars["validator_expect"]["validator_toolkit"]["torch"] == "2.9.1"


def test_a_baked_stack_s_image_still_lists_its_toolkit(h100: Any, tmp_path: Path) -> None:
    avars = ansible_vars(_baked(h100), "aws", validator_toolkit_wheelhouse="/tmp/tk.tar")
    assert (avars["validator_toolkit_torch"], avars["validator_toolkit_cuda"]) == ("2.9.1", "12.8")
    manifest = _manifest(_venv(tmp_path / "opt-imagectl", torch=True), tmp_path)
    assert manifest.validator_toolkit == {"torch": "2.9.1+cu128", "cuda": "12.8"}


def test_bake_changes_the_stack_digest_and_the_default_does_not(h100: Any) -> None:
    assert "install" not in h100.stack.model_dump(mode="json")["validation"]["toolkit"]
    assert stack_digest(_baked(h100).stack) != h100.digest == stack_digest(h100.stack)
