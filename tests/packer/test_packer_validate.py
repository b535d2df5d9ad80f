"""Every template with every shipped stack passes the real ``packer validate``.

The var files come from the production path (``write_var_files``) and the template
folder is staged as ``imagectl build`` stages it (without ``plugins.pkr.hcl`` for
Packer 1.6.6). Also checks the variable contract both ways: every name packer_vars()
feeds is declared, and every declared variable without a default is fed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.clouds.base_image import BaseImage
from imagectl.core.errors import UserError
from imagectl.packer.binary import PLUGINS_VERSION, PackerBinary, find_packer
from imagectl.packer.command import validate_command
from imagectl.packer.templates import (
    BUILD_TEMPLATE,
    PLUGINS_FILE,
    render_build,
    stage_templates,
    template_files,
)
from imagectl.packer.variables import PackerRuntime, packer_vars, write_var_files
from imagectl.stacks import load_resolved, stack_paths
from tests.support import ROOT, flat, require_tool

IMAGES = ROOT / "images"
CASES = [
    (p.stem, cloud)
    for p in stack_paths(IMAGES / "stacks")
    for cloud in load_resolved(IMAGES, p.stem)[1].stack.clouds.enabled()
]
# a base image id of each cloud's form (AMI id, Compute Engine image name, Azure version)
BASE_IDS = {
    "aws": "ami-0123456789abcdef0",
    "gcp": "ubuntu-2204-jammy-v20261101",
    "azure": "22.04.202611010",
}
_VARIABLE = re.compile(r'^variable\s+"([A-Za-z0-9_]+)"\s*\{(.*?)^\}', re.M | re.S)


def declared(cloud: str) -> dict[str, bool]:
    """variable name -> has a default, from every template file a build of <cloud> stages."""
    text = "\n".join(f.read_text() for f in template_files(IMAGES / cloud))
    return {m[1]: bool(re.search(r"^\s*default\s*=", m[2], re.M)) for m in _VARIABLE.finditer(text)}


@pytest.mark.parametrize(("stack", "cloud"), CASES)
def test_variable_contract(stack: str, cloud: str) -> None:
    _, resolved = load_resolved(IMAGES, stack)
    fed = set(packer_vars(resolved, cloud))
    decl = declared(cloud)
    assert fed - set(decl) == set(), "fed but not declared"
    required = {name for name, has_default in decl.items() if not has_default}
    assert required - fed == set(), "declared without default but never fed"


def test_every_cloud_keeps_plugins_in_own_file() -> None:
    for cloud in ("aws", "gcp", "azure", "local"):
        folder = IMAGES / cloud
        assert "required_plugins" in (folder / PLUGINS_FILE).read_text()
        for f in folder.glob("*.pkr.hcl"):
            if f.name != PLUGINS_FILE:
                assert "required_plugins" not in f.read_text(), f


def test_common_variables_are_declared_once() -> None:
    """The stack-fed variables live in images/common/; a copy in a cloud folder would drift."""
    common = set(declared_in(IMAGES / "common" / "stack.pkr.hcl"))
    assert {"stack_digest", "driver_version", "image_tags"} <= common
    for cloud in ("aws", "gcp", "azure", "local"):
        own = set(declared_in(IMAGES / cloud / "variables.pkr.hcl"))
        assert own & common == set(), f"{cloud} declares common variables again"
        assert not (IMAGES / cloud / "stack.pkr.hcl").exists()


def declared_in(path: Path) -> list[str]:
    return [m[1] for m in _VARIABLE.finditer(path.read_text())]


@pytest.mark.parametrize("version", [(1, 6, 6), PLUGINS_VERSION])
def test_staged_folder_holds_the_cloud_and_the_common_templates(
    version: tuple[int, int, int], tmp_path: Path
) -> None:
    binary = PackerBinary(path="packer", version=version)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "stale.pkr.hcl").write_text("# from an earlier build\n")
    folder = stage_templates(IMAGES / "aws", tmp_path / "templates", binary)
    names = sorted(p.name for p in folder.glob("*.pkr.hcl"))
    expected = ["build.pkr.hcl", "candidate.pkr.hcl", "stack.pkr.hcl", "variables.pkr.hcl"]
    if binary.supports_plugin_blocks:  # 1.6.6 fails on the required_plugins block
        expected.append(PLUGINS_FILE)
    assert names == sorted(expected)
    assert (folder / "stack.pkr.hcl").read_text() == (
        IMAGES / "common" / "stack.pkr.hcl"
    ).read_text()
    build = (folder / "build.pkr.hcl").read_text()
    assert 'sources = ["source.amazon-ebs.candidate"]' in build
    assert "@SOURCE@" not in build


def test_one_build_block_shared_by_every_cloud() -> None:
    """The build {} block lives once, in images/common/; a cloud folder holds only its
    source and variables (four copies of the block had drifted apart)."""
    for cloud in ("aws", "gcp", "azure", "local"):
        for f in (IMAGES / cloud).glob("*.pkr.hcl"):
            assert not re.search(r"^build\s*\{", f.read_text(), re.M), f
    assert re.search(r"^build\s*\{", (IMAGES / "common" / BUILD_TEMPLATE).read_text(), re.M)


def test_a_source_the_spec_does_not_name_is_refused(tmp_path: Path) -> None:
    """images/gcp with an amazon-ebs source: the staged build would name a source that
    does not exist, so staging stops with the spec's builder in the message."""
    shutil.copytree(IMAGES / "common", tmp_path / "common")
    (tmp_path / "gcp").mkdir()
    (tmp_path / "gcp" / "candidate.pkr.hcl").write_text(
        (IMAGES / "aws" / "candidate.pkr.hcl").read_text()
    )
    with pytest.raises(UserError, match=r'declares no source "googlecompute" "candidate"'):
        render_build(tmp_path / "gcp")


def test_only_azure_generalises_after_ansible() -> None:
    """The shared block's shell step runs the spec's deprovision command: waagent's on
    Azure ("Create a generalized image"), nothing elsewhere."""
    for stack, cloud in CASES:
        _, resolved = load_resolved(IMAGES, stack)
        command = packer_vars(resolved, cloud)["deprovision_command"]
        assert ("waagent -force -deprovision+user" in command) == (cloud == "azure"), cloud


def test_a_cloud_file_named_like_a_common_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "stack.pkr.hcl").write_text('variable "a" {}\n')
    (tmp_path / "aws").mkdir()
    (tmp_path / "aws" / "stack.pkr.hcl").write_text('variable "a" {}\n')
    with pytest.raises(UserError, match=r"both hold stack\.pkr\.hcl"):
        template_files(tmp_path / "aws")


def _local_base(tmp: Path) -> Path:
    base = tmp / "base"
    base.mkdir()
    keygen = require_tool("ssh-keygen")
    subprocess.run(
        [keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(base / "id_ed25519")], check=True
    )
    return base


@pytest.mark.parametrize(("stack", "cloud"), CASES)
def test_packer_validate(stack: str, cloud: str, tmp_path: Path) -> None:
    require_tool("packer")
    require_tool("ansible-playbook")  # the ansible provisioner checks for it
    binary = find_packer()
    _, resolved = load_resolved(IMAGES, stack)
    # what a build fills in; the local cloud's disk paths too
    local = {"local_base_dir": str(_local_base(tmp_path)),
             "local_output_dir": str(tmp_path / "output")} if cloud == "local" else {}  # fmt: skip
    runtime = PackerRuntime(
        build_id="20261122-042530-ab12cd",
        git_commit="0" * 40,
        playbook_file=str(ROOT / "playbooks" / "site.yml"),
        manifest_file=str(tmp_path / "manifest.json"),
        cloud_vars=local,
    )
    # a build always gives Packer the base image by id (imagectl.building.base_image)
    base = BaseImage(cloud=cloud, id=BASE_IDS.get(cloud, ""))
    var_file, _, _, _ = write_var_files(resolved, cloud, tmp_path, runtime, base_image=base)
    folder = stage_templates(IMAGES / cloud, tmp_path / "templates", binary)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        validate_command(binary, folder, var_file),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Undefined variable" not in flat(output), output


def test_validate_fails_without_a_required_variable(tmp_path: Path) -> None:
    """The check above can fail: drop one fed variable and packer refuses."""
    require_tool("packer")
    require_tool("ansible-playbook")
    binary = find_packer()
    _, resolved = load_resolved(IMAGES, "h100-training")
    var_file, _, _pvars, _ = write_var_files(
        resolved, "aws", tmp_path, PackerRuntime(playbook_file=str(ROOT / "playbooks" / "site.yml"))
    )
    text = var_file.read_text().replace('"aws_region"', '"aws_regionx"')
    var_file.write_text(text)
    folder = stage_templates(IMAGES / "aws", tmp_path / "templates", binary)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        validate_command(binary, folder, var_file), capture_output=True, text=True, env=env
    )
    assert proc.returncode != 0
    assert "aws_region" in flat(proc.stdout + proc.stderr)
