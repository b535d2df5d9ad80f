"""One source of expectations: the image's expect.json, the roles' package lists and every
validation run come from imagectl.stacks.expectations and images/compat/packages.yaml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from imagectl.packer.variables import ansible_vars, write_var_files
from imagectl.stacks import load_resolved, stack_paths
from imagectl.stacks.expectations import for_shape, image_expectations
from imagectl.validators.checks.software import version_matches
from imagectl.validators.expectations import Expectations
from tests.support import ROOT

IMAGES = ROOT / "images"
STACK_CLOUDS = [
    (path.stem, cloud)
    for path in stack_paths(IMAGES / "stacks")
    for cloud in load_resolved(IMAGES, path.stem)[1].stack.clouds.enabled()
]


@pytest.mark.parametrize(("stack", "cloud"), STACK_CLOUDS)
def test_the_image_checks_what_the_roles_install_and_hold(stack: str, cloud: str) -> None:
    _, resolved = load_resolved(IMAGES, stack)
    avars = ansible_vars(resolved, cloud)
    expect = Expectations.model_validate(avars["validator_expect"])
    installed = {
        name
        for var, names in avars.items()
        if var.endswith("_packages") and var != "base_packages"
        for name in names
    } | set(avars["base_packages"])
    assert set(expect.packages) == installed
    kernel = avars["base_kernel_version"]
    assert set(expect.held) == installed | {f"linux-image-{kernel}"}
    assert expect.stack_digest == resolved.digest and expect.cloud == cloud
    nvidia = resolved.stack.nvidia
    assert expect.driver == (nvidia.driver.version if nvidia else None)


def test_package_names_and_pins_follow_nvidia_s_repository() -> None:
    """Names and versions as NVIDIA's CUDA repository publishes them for the H100 stack
    (driver 580.95.05 open, CUDA 12.8.1, NCCL 2.26.2, DCGM 4.4.1, toolkit 1.18.0; revisions
    as in https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/)."""
    _, resolved = load_resolved(IMAGES, "h100-training")
    published = {
        "nvidia-driver-580-open": "580.95.05-0ubuntu1",
        "nvidia-dkms-580-open": "580.95.05-0ubuntu1",
        "libnvidia-compute-580": "580.95.05-0ubuntu1",
        "nvidia-fabricmanager-580": "580.95.05-1",
        "libnvidia-nscq-580": "580.95.05-1",
        "cuda-toolkit-12-8": "12.8.1-1",
        "libnccl2": "2.26.2-1+cuda12.8",
        "libnccl-dev": "2.26.2-1+cuda12.8",
        "datacenter-gpu-manager-4-cuda12": "1:4.4.1-1",
        "datacenter-gpu-manager-4-core": "1:4.4.1-1",
        "nvidia-container-toolkit": "1.18.0-1",
    }
    pins = image_expectations(resolved, "aws").packages
    for name, version in published.items():
        assert version_matches(version, pins[name]), (name, version, pins[name])
    # A neighbouring release never satisfies a pin.
    for name, version in {
        "nvidia-driver-580-open": "580.95.051-0ubuntu1",
        "cuda-toolkit-12-8": "12.8.10-1",
        "libnccl2": "2.26.2-1+cuda12.9",
        "datacenter-gpu-manager-4-cuda12": "1:4.4.10-1",
    }.items():
        assert not version_matches(version, pins[name]), (name, version)


def test_the_proprietary_flavour_and_a_stack_without_fabric_manager() -> None:
    _, l4 = load_resolved(IMAGES, "inference-l4-a10g")
    names = set(image_expectations(l4, next(iter(l4.stack.clouds.enabled()))).packages)
    assert not any(n.startswith(("nvidia-fabricmanager", "libnvidia-nscq")) for n in names)
    flavour = "-open" if l4.stack.nvidia and l4.stack.nvidia.driver.kernel_modules == "open" else ""
    assert f"nvidia-driver-{l4.driver_branch}{flavour}" in names


def test_vars_file_carries_the_expectations_marked_unsafe(tmp_path: Path) -> None:
    _, resolved = load_resolved(IMAGES, "h100-training")
    _, avars_file, _, avars = write_var_files(resolved, "gcp", tmp_path)
    written: dict[str, Any] = json.loads(avars_file.read_text())
    assert written["validator_expect"]["driver"] == {"__ansible_unsafe": "580.95.05"}
    assert avars["validator_expect"] == image_expectations(resolved, "gcp").model_dump(mode="json")


def test_a_shape_adds_hardware_to_the_image_s_expectations() -> None:
    _, resolved = load_resolved(IMAGES, "h100-training")
    image = image_expectations(resolved, "aws")
    shaped = for_shape(IMAGES, resolved, "p5.48xlarge", image_id="ami-1")
    same = {"packages", "held", "driver", "cuda", "nccl", "kernel", "stack_digest", "profile"}
    assert {k: getattr(shaped, k) for k in same} == {k: getattr(image, k) for k in same}
    assert (shaped.shape, shaped.gpu_count, shaped.image_id) == ("p5.48xlarge", 8, "ami-1")
    assert shaped.hardware is not None and shaped.hardware.nvswitch
