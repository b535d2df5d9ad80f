"""Upstream drift against fixture copies of NVIDIA's CUDA repository indexes.

Every rule: newer driver within the branch (moving with the fabric manager), NCCL for the
same CUDA major only, CUDA patch releases, DCGM, branch end of life (near and past),
proposals checked by the compatibility engine, exit codes and output formats.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from drift_helpers import edit, kinds, proposals, stack_report

pytestmark = pytest.mark.usefixtures("nvidia_repo")


def drift(cli, ws: Path, stack: str, *extra: str):  # type: ignore[no-untyped-def]
    return cli(
        "--root",
        str(ws),
        "drift",
        "--upstream",
        "--stack",
        stack,
        "--format",
        "json",
        "--as-of",
        "2026-11-01",
        *extra,
    )


def test_nvswitch_stack_moves_driver_only_with_its_fabric_manager(cli, workspace_copy):
    result = drift(cli, workspace_copy, "h100-training")
    assert result.code == 1, result.err
    entry = stack_report(result, "h100-training")
    found = kinds(entry)
    # 580.126.09 exists, but its fabric manager does not: propose 580.105.08
    assert found["driver-newer"]["available"] == "580.105.08"
    assert found["fabric-manager-newer"]["current"] == "580.95.05"
    assert found["fabric-manager-newer"]["available"] == "580.105.08"
    assert found["driver-without-fabric-manager"]["available"] == "580.126.09"
    assert found["driver-without-fabric-manager"]["severity"] == "info"
    pin = proposals(entry)["nvidia.driver.version"]
    assert (pin["current"], pin["proposed"], pin["writable"]) == ("580.95.05", "580.105.08", True)


def test_stack_without_fabric_manager_takes_newest_in_branch(cli, workspace_copy):
    entry = stack_report(drift(cli, workspace_copy, "inference-l4-a10g"), "inference-l4-a10g")
    found = kinds(entry)
    assert found["driver-newer"]["available"] == "580.126.09"
    assert "fabric-manager-newer" not in found
    # other branches (R590 in the index) are never proposed
    assert proposals(entry)["nvidia.driver.version"]["proposed"].startswith("580.")


def test_newer_repository_layout_unversioned_fabric_manager_and_gzip(cli, workspace_copy):
    entry = stack_report(drift(cli, workspace_copy, "b200-training"), "b200-training")
    found = kinds(entry)
    assert entry["checked"][0]["index"][0].endswith("ubuntu2404/x86_64/Packages.gz")
    assert found["driver-newer"]["available"] == "580.126.09"
    assert found["fabric-manager-newer"]["available"] == "580.126.09"


def test_nccl_only_for_the_toolkits_cuda_major(cli, workspace_copy):
    h100 = kinds(stack_report(drift(cli, workspace_copy, "h100-training"), "h100-training"))
    # +cuda13.0 builds (2.28.9, 2.29.1) are newer but for another CUDA major; +cuda12.9
    # is newer than the 12.8 toolkit: the 12.8 build of 2.27.5 is the one to take
    assert h100["nccl-newer"]["available"] == "2.27.5-1+cuda12.8"
    b200 = kinds(stack_report(drift(cli, workspace_copy, "b200-training"), "b200-training"))
    assert b200["nccl-newer"]["available"] == "2.28.9-1+cuda13.0"  # not 2.29.2-1+cuda12.9


def test_nccl_current_is_not_drift(cli, workspace_copy):
    edit(workspace_copy, "h100-training", '"2.26.2-1+cuda12.8"', '"2.27.5-1+cuda12.8"')
    found = kinds(stack_report(drift(cli, workspace_copy, "h100-training"), "h100-training"))
    assert "nccl-newer" not in found


def test_cuda_patch_release_is_proposed_and_passes_the_engine(cli, workspace_copy):
    edit(workspace_copy, "h100-training", '"12.8.1"', '"12.8.0"')
    entry = stack_report(drift(cli, workspace_copy, "h100-training"), "h100-training")
    assert kinds(entry)["cuda-newer"]["available"] == "12.8.1"
    pin = proposals(entry)["nvidia.cuda"]
    assert (pin["proposed"], pin["writable"]) == ("12.8.1", True)


def test_cuda_release_unknown_to_the_compat_table_is_reported_not_written(cli, workspace_copy):
    path = workspace_copy / "images" / "stacks" / "b200-training.yaml"
    result = drift(cli, workspace_copy, "b200-training", "--write")
    entry = stack_report(result, "b200-training")
    pin = proposals(entry)["nvidia.cuda"]
    assert pin["proposed"] == "13.0.3"
    assert pin["blocked_by"] == ["UNKNOWN-TO-COMPAT-DATA"]
    text = path.read_text()
    assert 'cuda: "13.0.2"' in text  # not written
    assert 'version: "580.126.09"' in text  # the others were


def test_proposal_that_breaks_a_rule_is_reported_but_not_written(cli, workspace_copy):
    # R570 only at 570.86.15 in the index; CUDA 12.8.1 needs >= 570.124.06
    path = edit(workspace_copy, "inference-l4-a10g", '"580.95.05"', '"570.86.15"')
    edit(workspace_copy, "inference-l4-a10g", '"12.9.1"', '"12.8.0"')
    edit(workspace_copy, "inference-l4-a10g", '"2.27.5-1+cuda12.9"', '"2.26.2-1+cuda12.8"')
    result = cli(
        "--root",
        str(workspace_copy),
        "drift",
        "--upstream",
        "--stack",
        "inference-l4-a10g",
        "--format",
        "json",
        "--as-of",
        "2025-06-01",
        "--write",
    )
    assert result.code == 1, result.err
    entry = stack_report(result, "inference-l4-a10g")
    pins = proposals(entry)
    assert pins["nvidia.cuda"]["proposed"] == "12.8.1"
    assert pins["nvidia.cuda"]["blocked_by"] == ["CUDA-DRIVER-MIN"]
    assert pins["nvidia.nccl"]["writable"] is True
    text = path.read_text()
    assert 'cuda: "12.8.0"' in text
    assert 'nccl: "2.27.5-1+cuda12.8"' in text
    assert entry["written"] is True


@pytest.mark.parametrize(
    ("as_of", "kind", "severity"),
    [("2026-01-15", "branch-eol-soon", "warning"), ("2026-03-15", "branch-eol", "drift")],
)
def test_branch_near_and_past_end_of_life(cli, workspace_copy, as_of, kind, severity):
    edit(workspace_copy, "inference-l4-a10g", '"580.95.05"', '"570.86.15"')
    edit(workspace_copy, "inference-l4-a10g", '"12.9.1"', '"12.8.0"')
    edit(workspace_copy, "inference-l4-a10g", '"2.27.5-1+cuda12.9"', '"2.26.2-1+cuda12.8"')
    result = cli(
        "--root",
        str(workspace_copy),
        "drift",
        "--upstream",
        "--stack",
        "inference-l4-a10g",
        "--format",
        "json",
        "--as-of",
        as_of,
    )
    assert result.code == 1
    found = kinds(stack_report(result, "inference-l4-a10g"))
    assert found[kind]["severity"] == severity
    assert "2026-02-28" in found[kind]["detail"]
    assert "R580" in found[kind]["detail"]  # the LTSB successor the repository offers
    other = {"branch-eol", "branch-eol-soon"} - {kind}
    assert not other & set(found)


def test_branch_far_from_end_of_life_is_not_reported(cli, workspace_copy):
    found = kinds(stack_report(drift(cli, workspace_copy, "h100-training"), "h100-training"))
    assert not {"branch-eol", "branch-eol-soon"} & set(found)
    result = cli(
        "--root",
        str(workspace_copy),
        "drift",
        "--upstream",
        "--stack",
        "h100-training",
        "--format",
        "json",
        "--as-of",
        "2028-05-01",
    )
    assert kinds(stack_report(result, "h100-training"))["branch-eol-soon"]["current"]


def test_no_drift_exits_zero(cli, workspace_copy):
    ws = workspace_copy
    edit(ws, "inference-l4-a10g", '"580.95.05"', '"580.126.09"')
    edit(ws, "inference-l4-a10g", '"2.27.5-1+cuda12.9"', '"2.28.3-1+cuda12.9"')
    edit(ws, "inference-l4-a10g", 'dcgm: "1:4.4.1-1"', 'dcgm: "1:4.4.2-1"')
    result = drift(cli, ws, "inference-l4-a10g")
    assert result.code == 0, result.out
    assert stack_report(result, "inference-l4-a10g")["findings"] == []


def test_write_keeps_comments_and_layout_and_the_file_still_lints(cli, workspace_copy):
    path = workspace_copy / "images" / "stacks" / "h100-training.yaml"
    before = path.read_text().splitlines()
    lint_before = cli("--root", str(workspace_copy), "lint", "--stack", "h100-training", "--json")
    result = drift(cli, workspace_copy, "h100-training", "--write")
    assert result.code == 1
    after = path.read_text().splitlines()
    assert len(after) == len(before)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [
        ('    version: "580.95.05"', '    version: "580.105.08"'),
        ('  nccl: "2.26.2-1+cuda12.8"', '  nccl: "2.27.5-1+cuda12.8"'),
        ('  dcgm: "1:4.4.1-1"', '  dcgm: "1:4.4.2-1"'),
    ]
    assert "    kernel_modules: open          # recommended for Hopper" in after
    # the real `imagectl lint`: the rewritten file adds no problem (schema, rules, template
    # variables) to those the original has (none once templates and roles are present)
    lint = cli("--root", str(workspace_copy), "lint", "--stack", "h100-training", "--json")
    assert lint.code == lint_before.code, lint.out

    def problems(res):  # type: ignore[no-untyped-def]
        return {(p["rule"], p["message"]) for p in res.json()["stacks"][0]["problems"]}

    assert problems(lint) == problems(lint_before)
    assert not {r for r, _ in problems(lint)} & {"SCHEMA", "CUDA-DRIVER-MIN", "FM-EQUALS-DRIVER"}
    again = drift(cli, workspace_copy, "h100-training")
    assert "driver-newer" not in kinds(stack_report(again, "h100-training"))


def test_every_shipped_stack_round_trips_unchanged(workspace_copy):
    """--write's YAML settings reproduce every stack file byte for byte when nothing changes."""
    from imagectl.drift.writeback import _yaml

    for path in sorted((workspace_copy / "images" / "stacks").glob("*.yaml")):
        from io import StringIO

        yaml = _yaml()
        buf = StringIO()
        yaml.dump(yaml.load(path.read_text()), buf)
        assert buf.getvalue() == path.read_text(), path.name


def test_markdown_is_an_issue_body_with_a_marker(cli, workspace_copy):
    result = cli(
        "--root",
        str(workspace_copy),
        "drift",
        "--upstream",
        "--stack",
        "h100-training",
        "--format",
        "markdown",
        "--as-of",
        "2026-11-01",
    )
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0] == "<!-- imagectl-drift:stack=h100-training -->"
    assert any(line.startswith("| upstream | `driver-newer` |") for line in lines)
    assert "`nvidia.driver.version`: `580.95.05` -> `580.105.08`" in result.out


def test_table_output(cli, workspace_copy):
    result = cli(
        "--root",
        str(workspace_copy),
        "drift",
        "--upstream",
        "--stack",
        "h100-training",
        "--as-of",
        "2026-11-01",
    )
    assert result.code == 1
    assert "driver-newer" in result.out and "580.105.08" in result.out
    assert "1 with drift" in result.out


def test_unknown_stack_is_bad_input(cli, workspace_copy):
    result = drift(cli, workspace_copy, "nope")
    assert result.code == 2
    assert "no stack named 'nope'" in result.err


def _upstream_error(result) -> str:  # type: ignore[no-untyped-def]
    """A check that could not run: exit 1, the error in the report."""
    assert result.code == 1, result.err
    (error,) = stack_report(result, "h100-training")["errors"]
    assert error["source"] == "upstream"
    return str(error["message"])


def test_missing_index_is_an_error_of_the_check(cli, workspace_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", (tmp_path / "empty").as_uri())
    message = _upstream_error(drift(cli, workspace_copy, "h100-training"))
    assert "no package index under" in message and "ubuntu2204/x86_64" in message


def test_corrupt_index_is_an_error_of_the_check(cli, workspace_copy, tmp_path, monkeypatch):
    folder = tmp_path / "repo" / "ubuntu2204" / "x86_64"
    folder.mkdir(parents=True)
    (folder / "Packages.gz").write_bytes(gzip.compress(b"Package: x\nVersion: 1\n")[:20])
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", (tmp_path / "repo").as_uri())
    assert "is corrupt" in _upstream_error(drift(cli, workspace_copy, "h100-training"))


def test_json_lists_what_was_checked(cli, workspace_copy):
    result = drift(cli, workspace_copy, "h100-training")
    doc = json.loads(result.out)
    assert doc["sources"] == ["upstream"] and doc["drift"] is True
    checked = {c.get("subject"): c for c in stack_report(result, "h100-training")["checked"]}
    assert checked["cuda-toolkit-12-8"]["latest"] == "12.8.1"
    assert checked["driver"]["latest"] == "580.126.09"


def test_the_repo_url_option_is_the_index_read(cli, workspace_copy, tmp_path):
    """``--nvidia-repo-url`` is the index drift reads, over $IMAGECTL_NVIDIA_REPO_URL (the
    fixture index here): an empty folder given on the command line is the error named."""
    fixture = stack_report(drift(cli, workspace_copy, "h100-training"), "h100-training")
    assert not fixture.get("errors") and fixture["checked"], fixture  # the fixture's index read
    empty = (tmp_path / "mirror").as_uri()
    result = drift(cli, workspace_copy, "h100-training", "--nvidia-repo-url", empty)
    message = _upstream_error(result)
    assert "no package index under" in message and "mirror" in message
