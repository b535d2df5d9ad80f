"""``imagectl build --dry-run``: the exact packer command and variables, nothing run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from sqlalchemy import func, select

from imagectl.catalog.db import open_catalog
from imagectl.catalog.models import Build
from imagectl.cli import main
from imagectl.clouds.local.spec import BASE_MADE_BY_BUILD
from imagectl.packer.variables import packer_vars
from imagectl.stacks import load_resolved
from tests.support import ROOT, CliText


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--root", str(ROOT), "build", *args])
    out = capsys.readouterr()
    return code, CliText(out.out), CliText(out.err)


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
    assert written["driver_version"] == resolved.pins().driver
    assert written["image_tags"]["imagectl:lifecycle"] == "candidate"
    assert written["image_tags"]["imagectl:build-id"] == "20261122-042530-ab12cd"
    ansible_file = Path(written["ansible_vars_file"])
    assert json.loads(ansible_file.read_text())["nccl_version"] == {
        "__ansible_unsafe": resolved.pins().nccl
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


@pytest.mark.parametrize("option", [["--reuse"], ["--inject-fault", "unheld-package"]])
def test_local_build_options_are_refused_for_a_cloud_before_anything_is_recorded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: list[str]
) -> None:
    """Reusing a kept candidate and injecting a fault are the local build's (the local
    cloud builds its own base disk, imagectl.building.local); a cloud build with either
    is bad input, refused before Packer or the catalog."""
    var_dir = tmp_path / "vars"
    code, _, err = _run(capsys, "--stack", "h100-training", "--cloud", "aws", "--var-dir",
                        str(var_dir), *option)  # fmt: skip
    assert code == 2
    assert "options of the local cloud's build" in err
    assert not var_dir.exists()  # no var files, no Packer run
    with open_catalog().transaction() as s:
        assert s.scalar(select(func.count()).select_from(Build)) == 0


def test_the_local_plan_names_where_its_base_disk_comes_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _run(
        capsys, "--stack", "local", "--cloud", "local", "--dry-run", "--json",
        "--var-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0
    assert json.loads(out)["packer_vars"]["local_base_dir"] == BASE_MADE_BY_BUILD
