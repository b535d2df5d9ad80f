"""A cloud is its folder: a fifth cloud registered from tests/ only, through the
``imagectl.clouds`` entry point group of a throwaway distribution (a dist-info folder with
``entry_points.txt`` on PYTHONPATH), runs ``plan``, ``lint``, ``build --dry-run`` and a
replayed ``validate-image`` on a stack with its section, with no file outside tests/
edited: its folder (tests/clouds/fifth/: stack section, spec, provider), its Packer folder
(tests/clouds/fifth/packer/, named by ``CloudSpec.templates``) and its data (its shapes,
tests/clouds/fifth/shapes.yaml, named by ``CloudSpec.shapes_file``).

Each command runs in its own ``imagectl`` process, as a user's would, with the plugin's
distribution on the path; the fifth cloud's provider keeps its images and instances in
files, so the processes share one cloud. The validation hosts are this machine (an
inventory override with ``ansible_connection: local``) replaying the library's healthy
H100 snapshot, as the other replayed validate-image tests do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from imagectl.stacks import load_resolved
from tests.clouds.scenario import HEALTHY, write_override
from tests.support import flat

REPO = Path(__file__).resolve().parents[2]
ENTRY = "fifth = tests.clouds.fifth.spec:SPEC"
STACK = "fifth-training"
KERNEL = "6.8.0-1039-aws"  # the kernel the library's H100 snapshots were taken on
BASE = "fifth-img-0a1b2c3d"


def plugin(tmp_path: Path, entry: str = ENTRY) -> Path:
    """A distribution that declares nothing but the fifth cloud's entry point."""
    site = tmp_path / "plugin"
    info = site / "imagectl_fifth-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: imagectl-fifth\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[imagectl.clouds]\n{entry}\n")
    return site


def stack_text() -> str:
    """h100-training's pins (so the H100 snapshot replays healthy), on the fifth cloud."""
    source = (REPO / "images" / "stacks" / "h100-training.yaml").read_text()
    head = source[: source.index("\nclouds:")]
    head = head.replace("name: h100-training", f"name: {STACK}").replace("example: true\n", "")
    head = head[: head.index("\n  infiniband:")] + head[head.index("\ngpus:") :]
    return head + (
        "\nclouds:\n"
        "  fifth:\n"
        f'    kernel: "{KERNEL}"\n'
        f"    base_image: {BASE}\n"
        "    build: {site: fifth-one, machine: f8.large}\n"
        "    validation_shapes: [fifth-h100x8]\n"
        "    regions: [fifth-one, fifth-two]\n"
    )


@pytest.fixture
def fifth(tmp_path: Path, workspace_copy: Path, monkeypatch: pytest.MonkeyPatch):
    (workspace_copy / "images" / "stacks" / f"{STACK}.yaml").write_text(stack_text())
    site = plugin(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(site)]))
    monkeypatch.setenv("FIFTH_CLOUD_STATE", str(tmp_path / "fifth-cloud"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "imagectl", "--root", str(workspace_copy), *args],
            capture_output=True, text=True, timeout=240, cwd=tmp_path,
        )  # fmt: skip

    return run


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def replay_snapshot(folder: Path, digest: str, image_id: str) -> Path:
    """The library's healthy H100 host, as booted from the fifth cloud's image: its image
    manifest and expectation file name the fifth stack, its metadata the fifth cloud."""
    data = json.loads(HEALTHY.read_text())
    host = data["host"]
    for part in (host["manifest"], host["expect_file"]):
        part.update(stack=STACK, stack_digest=digest)
    host["cloud_image"] = {"cloud": "fifth", "image_id": image_id}
    assert host["kernel_release"] == KERNEL
    path = folder / "fifth--h100-sxm-8x.json"
    path.write_text(json.dumps(data))
    return path


def test_a_fifth_cloud_registered_from_tests_plans_lints_builds_and_validates(
    fifth: Any, tmp_path: Path
) -> None:
    lint = fifth("lint", "--stack", STACK, "--json")
    assert lint.returncode == 0, lint.stderr
    [report] = _json(lint)["stacks"]
    assert report["ok"] and report["problems"] == []
    digest = report["digest"]
    # registering a cloud changes no other stack's digest (its absent section is not
    # written into digests; the builtin clouds' absent sections still are, as before)
    other = _json(fifth("lint", "--stack", "h100-training", "--json"))["stacks"][0]["digest"]
    assert other == load_resolved(REPO / "images", "h100-training")[1].digest

    plan = fifth("plan", "--stack", STACK, "--out", str(tmp_path / "plan"), "--json")
    assert plan.returncode == 0, plan.stderr
    [row] = _json(plan)["matrix"]
    assert (row["cloud"], row["build_location"], row["build_machine"]) == (
        "fifth", "fifth-one", "f8.large",
    )  # fmt: skip
    assert row["validation_shapes"] == ["fifth-h100x8"]
    assert row["base_image"]["id"] == BASE and row["base_image"]["source"] == "pinned"
    pvars = json.loads(Path(row["packer_var_file"]).read_text())
    assert (pvars["fifth_site"], pvars["fifth_base_image"]) == ("fifth-one", BASE)

    build = fifth("build", "--stack", STACK, "--cloud", "fifth", "--dry-run", "--json",
                  "--var-dir", str(tmp_path / "build"))  # fmt: skip
    assert build.returncode == 0, build.stderr
    dry = _json(build)
    staged = Path(dry["command"][-1])
    # its own templates (from tests/clouds/fifth/packer/) and imagectl's shared ones
    assert sorted(p.name for p in staged.glob("*.pkr.hcl")) == [
        "build.pkr.hcl", "candidate.pkr.hcl", "stack.pkr.hcl", "variables.pkr.hcl",
    ]  # fmt: skip
    assert 'sources = ["source.null.candidate"]' in (staged / "build.pkr.hcl").read_text()
    assert dry["packer_vars"]["fifth_machine"] == "f8.large"
    assert dry["packer_vars"]["stack_digest"] == digest

    # validate-image: the candidate in the fifth cloud, its host this machine replaying
    from tests.clouds.fifth.provider import seed_image

    image_id = "fifth-cand-1"
    seed_image(image_id, "fifth-one", {"imagectl:stack": STACK, "imagectl:stack-digest": digest})
    snapshot = replay_snapshot(tmp_path, digest, image_id)
    override = write_override(tmp_path, [], snapshot)
    result = fifth(
        "validate-image", image_id, "--cloud", "fifth", "--stack", STACK,
        "--inventory-override", str(override), "--reach-timeout", "2", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    outcome = _json(result)
    assert (outcome["cloud"], outcome["shape"], outcome["state"]) == (
        "fifth", "fifth-h100x8", "validated",
    )  # fmt: skip
    [host] = outcome["hosts"]
    assert host["verdict"] == "pass" and host["shape"] == "fifth-h100x8"
    assert outcome["terminated"] == [host["host"]]


def test_a_stack_naming_a_cloud_nobody_registered_is_a_clear_error(
    cli: Any, workspace_copy: Path
) -> None:
    """Without the fifth cloud's distribution, its stack names an unknown cloud: one
    paragraph naming the file, the line, the registered clouds and what to do; exit 2."""
    path = workspace_copy / "images" / "stacks" / f"{STACK}.yaml"
    path.write_text(stack_text())
    line = path.read_text().splitlines().index("  fifth:") + 1
    result = cli("--root", str(workspace_copy), "plan", "--stack", STACK, "--offline")
    assert result.code == 2
    assert "Traceback" not in result.err
    message = " ".join(result.err.split())
    assert f"{path}:{line}: unknown cloud 'fifth' under clouds" in message
    assert "imagectl knows aws, gcp, azure, local" in message
    assert "entry point group imagectl.clouds" in message
    unknown = cli("--root", str(workspace_copy), "plan", "--cloud", "fifth")
    assert unknown.code == 2 and "'fifth' is not one of" in unknown.err


def test_an_entry_point_that_names_no_spec_is_a_clear_error(
    fifth: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = plugin(tmp_path / "broken", "fifth = tests.clouds.fifth.spec:NO_SUCH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(broken)]))
    result = fifth("plan", "--stack", STACK, "--offline")
    assert result.returncode == 2, result.stderr
    message = " ".join(result.stderr.split())
    assert "cloud 'fifth' cannot be loaded from entry point 'fifth = " in message
    assert "of imagectl-fifth (group imagectl.clouds)" in message
    assert "Traceback" not in flat(result.stderr)
