"""``imagectl build --dry-run``: the exact packer command and variables, nothing run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from imagectl.cli import main
from imagectl.packer.variables import packer_vars
from imagectl.stacks import load_resolved
from tests.support import ROOT


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--root", str(ROOT), "build", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dry_run_prints_command_and_writes_var_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _run(
        capsys,
        "--stack",
        "h100-training",
        "--cloud",
        "aws",
        "--dry-run",
        "--var-dir",
        str(tmp_path),
        "--build-id",
        "20261122-042530-ab12cd",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("# build 20261122-042530-ab12cd: stack h100-training, cloud aws")
    command_line = next(line for line in lines if " build -machine-readable " in line)
    argv = shlex.split(command_line)
    var_file = tmp_path / "h100-training.aws.pkrvars.json"
    assert f"-var-file={var_file}" in argv
    staged = tmp_path / "templates"  # the cloud's templates and images/common's
    assert argv[-1] == str(staged)
    assert (staged / "candidate.pkr.hcl").is_file() and (staged / "stack.pkr.hcl").is_file()
    written = json.loads(var_file.read_text())
    _, resolved = load_resolved(ROOT / "images", "h100-training")
    assert set(written) == set(packer_vars(resolved, "aws"))
    assert written["aws_region"] == "us-east-1"
    assert written["driver_version"] == resolved.pins()["driver"]
    assert written["image_tags"]["imagectl:lifecycle"] == "candidate"
    assert written["image_tags"]["imagectl:build-id"] == "20261122-042530-ab12cd"
    ansible_file = Path(written["ansible_vars_file"])
    assert json.loads(ansible_file.read_text())["nccl_version"] == {
        "__ansible_unsafe": resolved.pins()["nccl"]
    }
    assert '"aws_region": "us-east-1"' in out  # the variables are printed too
    assert not (tmp_path / "manifest.json").exists()


def test_dry_run_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(
        capsys,
        "--stack",
        "local",
        "--cloud",
        "local",
        "--dry-run",
        "--json",
        "--var-dir",
        str(tmp_path),
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["command"][1:4] == ["build", "-machine-readable", "-color=false"]
    assert doc["packer_vars"]["local_kernel"] == "6.1.0-56-cloud-amd64"
    assert doc["ansible_vars"]["base_packages"]["jq"]


def test_cloud_the_stack_lacks_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--stack", "local", "--cloud", "aws", "--dry-run")
    assert code == 2
    assert "has no 'aws' cloud" in err


def test_bad_var_override_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys, "--stack", "local", "--cloud", "local", "--dry-run", "--var", "novalue"
    )
    assert code == 2
    assert "NAME=VALUE" in err
