"""`imagectl lint` and `imagectl plan` on shipped and deliberately broken stacks."""

from __future__ import annotations

import json
from pathlib import Path

from imagectl.lint import declared_packer_vars, declared_role_vars


def edit(ws: Path, stack: str, old: str, new: str) -> Path:
    path = ws / "images" / "stacks" / f"{stack}.yaml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))
    return path


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def rules_of(body: dict, stack: str) -> dict[str, list[dict]]:
    [report] = [s for s in body["stacks"] if s["stack"] == stack]
    out: dict[str, list[dict]] = {}
    for p in report["problems"]:
        out.setdefault(p["rule"], []).append(p)
    return out


def test_lint_passes_on_shipped_stacks(cli) -> None:
    result = cli("lint", "--json")
    body = result.json()
    errors = [
        (s["stack"], p) for s in body["stacks"] for p in s["problems"] if p["severity"] == "error"
    ]
    assert errors == []
    assert result.code == 0
    assert len(body["stacks"]) >= 4


def test_fabric_manager_disabled_on_nvswitch_gpu(cli, workspace_copy: Path) -> None:
    path = edit(workspace_copy, "h100-training", "fabric_manager: auto", "fabric_manager: none")
    result = cli("--root", str(workspace_copy), "lint", "--stack", "h100-training", "--json")
    assert result.code == 1
    [problem] = rules_of(result.json(), "h100-training")["FM-REQUIRED"]
    assert problem["where"].endswith(f"h100-training.yaml:{line_of(path, 'fabric_manager: none')}")
    assert "NVSwitch" in problem["message"] and problem["source"]


def test_compat_violations_point_at_the_pinned_field(cli, workspace_copy: Path) -> None:
    path = edit(workspace_copy, "b200-training", 'cuda: "13.0.2"', 'cuda: "12.8.1"')
    result = cli("--root", str(workspace_copy), "lint", "--stack", "b200-training", "--json")
    assert result.code == 1
    rules = rules_of(result.json(), "b200-training")
    [nccl] = rules["NCCL-CUDA-MAJOR"]
    assert nccl["where"].endswith(f":{line_of(path, 'nccl:')}")


def test_proprietary_modules_on_blackwell(cli, workspace_copy: Path) -> None:
    edit(workspace_copy, "b200-training", "kernel_modules: open", "kernel_modules: proprietary")
    result = cli("--root", str(workspace_copy), "lint", "--json")
    assert result.code == 1
    assert "MODULES-ARCH" in rules_of(result.json(), "b200-training")
    # other stacks unaffected (the example stack's placeholder warnings aside)
    assert set(rules_of(result.json(), "h100-training")) <= {"PLACEHOLDER"}


def test_eol_branch_is_refused(cli, workspace_copy: Path) -> None:
    edit(workspace_copy, "inference-l4-a10g", 'version: "580.95.05"', 'version: "570.172.08"')
    edit(workspace_copy, "inference-l4-a10g", 'cuda: "12.9.1"', 'cuda: "12.8.1"')
    edit(workspace_copy, "inference-l4-a10g", "2.27.5-1+cuda12.9", "2.26.2-1+cuda12.8")
    result = cli("--root", str(workspace_copy), "lint", "--as-of", "2026-11-22", "--json")
    assert result.code == 1
    assert "BRANCH-EOL" in rules_of(result.json(), "inference-l4-a10g")
    early = cli("--root", str(workspace_copy), "lint", "--as-of", "2025-12-15", "--json")
    assert "BRANCH-EOL-SOON" in rules_of(early.json(), "inference-l4-a10g")


def test_shape_of_another_gpu_or_cloud(cli, workspace_copy: Path) -> None:
    path = edit(
        workspace_copy,
        "inference-l4-a10g",
        "[g6.xlarge, g5.xlarge]",
        "[p5.48xlarge, a3-highgpu-8g]",
    )
    result = cli("--root", str(workspace_copy), "lint", "--stack", "inference-l4-a10g", "--json")
    rules = rules_of(result.json(), "inference-l4-a10g")
    assert result.code == 1
    assert "H100-SXM-80GB" in rules["SHAPE-GPU"][0]["message"]
    assert "not a known aws validation shape" in rules["SHAPE-UNKNOWN"][0]["message"]
    assert rules["SHAPE-UNKNOWN"][0]["where"].endswith(f":{line_of(path, 'p5.48xlarge')}")


def test_malformed_stack_is_exit_2_and_others_still_linted(cli, workspace_copy: Path) -> None:
    edit(workspace_copy, "local", '  release: "12"', '  release: "11"')
    result = cli("--root", str(workspace_copy), "lint", "--json")
    assert result.code == 2
    body = result.json()
    schema = rules_of(body, "local")["SCHEMA"]
    assert "debian 11 is not supported" in schema[0]["message"]
    assert len(body["stacks"]) >= 4


def test_missing_template_variable_is_reported(cli, workspace_copy: Path) -> None:
    variables = workspace_copy / "images" / "aws" / "variables.pkr.hcl"
    text = variables.read_text()
    assert 'variable "aws_instance_type"' in text
    variables.write_text(
        text.replace('variable "aws_instance_type"', 'variable "aws_instance_kind"')
    )
    result = cli("--root", str(workspace_copy), "lint", "--stack", "h100-training", "--json")
    assert result.code == 1
    [problem] = rules_of(result.json(), "h100-training")["TEMPLATE-VAR-MISSING"]
    assert "aws_instance_type" in problem["message"]


def test_variable_missing_from_the_common_templates_is_reported(cli, workspace_copy) -> None:
    """images/common/ is part of every cloud's template set: lint reads it for each."""
    common = workspace_copy / "images" / "common" / "stack.pkr.hcl"
    text = common.read_text()
    assert 'variable "nccl_version"' in text
    common.write_text(text.replace('variable "nccl_version"', 'variable "nccl_release"'))
    result = cli("--root", str(workspace_copy), "lint", "--stack", "h100-training", "--json")
    assert result.code == 1
    problems = rules_of(result.json(), "h100-training")["TEMPLATE-VAR-MISSING"]
    folders = {Path(p["message"].split(" does ")[0].split()[-1]) for p in problems}
    assert {(f.parent.name, f.name) for f in folders} == {
        ("images", cloud) for cloud in ("aws", "gcp", "azure")
    }
    assert all("nccl_version" in p["message"] for p in problems)


def test_cloud_file_named_like_a_common_one_is_exit_2(cli, workspace_copy) -> None:
    images = workspace_copy / "images"
    (images / "aws" / "stack.pkr.hcl").write_text((images / "common" / "stack.pkr.hcl").read_text())
    result = cli("--root", str(workspace_copy), "lint", "--stack", "h100-training")
    assert result.code == 2
    err = " ".join(result.err.split())  # the paragraph wraps at the terminal's width
    assert "both hold stack.pkr.hcl" in err and "images/common" in err


def test_lint_unknown_stack_is_exit_2(cli) -> None:
    result = cli("lint", "--stack", "nope")
    assert result.code == 2
    assert "Known stacks:" in result.err


def test_plan_writes_resolved_variable_files(cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    # offline: no cloud is asked for the base image (tests/building/test_base_image.py asks
    # the emulators); the var files then carry the stack's pin, here none
    result = cli("plan", "--stack", "h100-training", "--out", str(out), "--json", "--offline")
    assert result.code == 0, result.err
    matrix = result.json()["matrix"]
    assert [(r["cloud"], r["validation_shapes"]) for r in matrix] == [
        ("aws", ["p5.48xlarge"]),
        ("gcp", ["a3-highgpu-8g"]),
        ("azure", ["Standard_ND96isr_H100_v5"]),
    ]
    aws = next(r for r in matrix if r["cloud"] == "aws")
    assert aws["build_location"] == "us-east-1"
    assert aws["target_regions"][0] == "us-east-1" and len(aws["target_regions"]) == 4
    pkr = json.loads((out / "h100-training.aws.pkrvars.json").read_text())
    raw = json.loads((out / "h100-training.aws.ansible.json").read_text())
    # every string reaches Ansible marked unsafe (never templated); booleans stay plain
    assert raw["nccl_version"] == {"__ansible_unsafe": "2.26.2-1+cuda12.8"}
    ans = {
        k: v["__ansible_unsafe"] if isinstance(v, dict) and "__ansible_unsafe" in v else v
        for k, v in raw.items()
    }
    assert pkr["driver_version"] == ans["nvidia_driver_version"] == ans["fabric_manager_version"]
    assert pkr["nccl_version"] == ans["nccl_version"] == "2.26.2-1+cuda12.8"
    assert pkr["ansible_vars_file"].endswith("h100-training.aws.ansible.json")
    assert ans["efa_enabled"] is True and ans["infiniband_enabled"] is False
    repo = Path(__file__).resolve().parents[2]
    assert set(pkr) <= declared_packer_vars(repo / "images" / "aws")
    assert set(ans) <= declared_role_vars(repo / "playbooks")


def test_plan_human_view_and_bad_cloud(cli, tmp_path: Path) -> None:
    ok = cli("plan", "--out", str(tmp_path), "--offline")
    assert ok.code == 0 and "Build matrix" in ok.out and "local-a" in ok.out
    bad = cli("plan", "--stack", "local", "--cloud", "aws", "--out", str(tmp_path))
    assert bad.code == 2 and "has no 'aws' cloud" in bad.err
    unknown = cli("plan", "--cloud", "ibm", "--out", str(tmp_path))
    assert unknown.code == 2 and "'ibm' is not one of" in unknown.err
