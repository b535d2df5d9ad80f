"""Stack files: schema errors name file, line and fix; digests identify pin sets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from imagectl.compat.data import load_compat
from imagectl.core.errors import StackError
from imagectl.stacks import load_stack, resolve, stack_paths

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "images" / "stacks"
H100 = (STACKS / "h100-training.yaml").read_text()


def write(tmp_path: Path, text: str, name: str = "h100-training") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def line_of(text: str, needle: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def problems(path: Path) -> list[str]:
    with pytest.raises(StackError) as info:
        load_stack(path)
    return info.value.problems


def test_shipped_stacks_load_and_resolve() -> None:
    data = load_compat(REPO / "images" / "compat")
    names = {p.stem for p in stack_paths(STACKS)}
    assert {"h100-training", "b200-training", "inference-l4-a10g", "local"} <= names
    h100 = resolve(load_stack(STACKS / "h100-training.yaml").stack, data)
    assert h100.fabric_manager == h100.stack.nvidia.driver.version  # derived, never typed
    assert set(h100.stack.clouds.enabled()) == {"aws", "gcp", "azure"}
    b200 = resolve(load_stack(STACKS / "b200-training.yaml").stack, data)
    assert b200.stack.nvidia.driver.kernel_modules == "open"
    assert b200.stack.nvidia.nccl.endswith("+cuda13.0")
    assert b200.dcgm_package == "datacenter-gpu-manager-4-cuda13"
    inference = resolve(load_stack(STACKS / "inference-l4-a10g.yaml").stack, data)
    assert inference.fabric_manager is None  # L4/A10G: no NVSwitch
    local = resolve(load_stack(STACKS / "local.yaml").stack, data)
    assert local.stack.os.distro == "debian" and local.stack.nvidia is None


def test_unknown_key_names_line_and_suggests(tmp_path: Path) -> None:
    text = H100.replace("    kernel_modules: open", "    kernel_module: open")
    found = problems(write(tmp_path, text))
    line = line_of(text, "kernel_module: open")
    [unknown] = [m for m in found if "unknown key" in m]
    assert f"h100-training.yaml:{line}: unknown key" in unknown
    joined = " ".join(found)
    assert "unknown key 'nvidia.driver.kernel_module'" in joined
    assert "did you mean 'kernel_modules'?" in joined
    assert "'nvidia.driver.kernel_modules' is required" in joined


def test_wrong_value_names_line(tmp_path: Path) -> None:
    text = H100.replace("kernel_modules: open", "kernel_modules: closed")
    [msg] = problems(write(tmp_path, text))
    assert msg.startswith(f"{tmp_path / 'h100-training.yaml'}:{line_of(text, 'closed')}:")
    assert "'open' or 'proprietary'" in msg


@pytest.mark.parametrize("kernel", ["6.8.0", "6.8.0-*-aws", "6.8.0-1039-aws ", "linux-6.8.0-1039"])
def test_a_kernel_that_is_not_an_exact_release_names_its_line(tmp_path: Path, kernel: str) -> None:
    """The kernel pin is what `uname -r` prints on the image: a range or a bare upstream
    version would let the build pick a kernel the driver's module was not built for."""
    text = H100.replace('kernel: "6.8.0-1039-aws"', f'kernel: "{kernel}"')
    [msg] = problems(write(tmp_path, text))
    assert msg.startswith(f"{tmp_path / 'h100-training.yaml'}:{line_of(text, kernel)}: clouds.aws")
    assert "stack.schema.json" in msg


ORG = '      organizations: ["arn:aws:organizations::111122223333:organization/o-exampleorgid"]'


@pytest.mark.parametrize(
    ("cloud", "old", "new", "words"),
    [
        ("aws", ORG, '      principals: ["group:ml@example.com"]',
         "share.principals: AWS shares an AMI"),
        ("gcp", "    family: h100-training",
         '    family: h100-training\n    share:\n      accounts: ["111122223333"]',
         "share.accounts: Compute Engine shares an image with IAM members"),
        ("azure", "      image_definition: h100-training",
         "      image_definition: h100-training\n    share:\n      public: true",
         "share.public: Azure publishes a gallery only as a community gallery"),
    ],
)  # fmt: skip
def test_sharing_a_cloud_cannot_apply_is_refused_not_dropped(
    tmp_path: Path, cloud: str, old: str, new: str, words: str
) -> None:
    """Each cloud's image-sharing API takes its own kind of grantee (EC2
    ModifyImageAttribute: accounts, organizations, OUs or all; Compute Engine IAM: members;
    Compute Gallery sharing profile: subscriptions and tenants, public only as a community
    gallery). A grantee the cloud cannot take was silently skipped by its provider."""
    assert H100.count(old) == 1
    text = H100.replace(old, new)
    [msg] = problems(write(tmp_path, text))
    assert f"clouds.{cloud}: {words}" in msg
    assert msg.startswith(f"{tmp_path / 'h100-training.yaml'}:{line_of(text, f'  {cloud}:')}:")


def test_bad_driver_version(tmp_path: Path) -> None:
    text = H100.replace('version: "580.95.05"', 'version: "580-latest"')
    [msg] = problems(write(tmp_path, text))
    assert f":{line_of(text, '580-latest')}:" in msg
    assert "cannot parse driver version '580-latest'" in msg


def test_bad_nccl_and_aws_account(tmp_path: Path) -> None:
    text = H100.replace('nccl: "2.26.2-1+cuda12.8"', 'nccl: "2.26.2"').replace(
        'organizations: ["arn:aws:organizations::111122223333:organization/o-exampleorgid"]',
        'accounts: ["12345"]',
    )
    msgs = problems(write(tmp_path, text))
    assert any("cannot parse NCCL version '2.26.2'" in m for m in msgs)
    assert any("'12345' is not a 12-digit AWS account id" in m for m in msgs)
    assert any(f":{line_of(text, 'accounts:')}:" in m for m in msgs)


def test_missing_required_section(tmp_path: Path) -> None:
    text = re.sub(r"^os:\n(  .*\n)+", "", H100, flags=re.MULTILINE)
    msgs = problems(write(tmp_path, text))
    assert any("'os' is required but missing" in m for m in msgs)


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    text = H100.replace('  cuda: "12.8.1"', "  cuda: [12.8.1")
    [msg] = problems(write(tmp_path, text))
    assert re.search(r"h100-training\.yaml:\d+:", msg)


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    text = H100.replace('  cuda: "12.8.1"', '  cuda: "12.8.1"\n  cuda: "12.9.1"')
    [msg] = problems(write(tmp_path, text))
    assert "h100-training.yaml:" in msg and "cuda" in msg


def test_name_must_match_file(tmp_path: Path) -> None:
    [msg] = problems(write(tmp_path, H100, name="other"))
    assert "must match the file name 'other'" in msg


def test_not_a_mapping(tmp_path: Path) -> None:
    [msg] = problems(write(tmp_path, "- just\n- a list\n"))
    assert "must be a YAML mapping" in msg


def test_digest_is_stable_and_tracks_pins(tmp_path: Path) -> None:
    data = load_compat(REPO / "images" / "compat")
    a = resolve(load_stack(write(tmp_path, H100)).stack, data).digest
    reformatted = H100.replace("# 8x H100", "#   8x H100").replace(
        'description: "8x', 'description: "Eight x'
    )
    b = resolve(load_stack(write(tmp_path, reformatted)).stack, data).digest
    assert a == b, "comments and description are not pins"
    bumped = H100.replace('nccl: "2.26.2-1+cuda12.8"', 'nccl: "2.26.5-1+cuda12.8"')
    c = resolve(load_stack(write(tmp_path, bumped)).stack, data).digest
    assert c != a and len(c) == 64
