"""GPU names as NVIDIA and nvidia-smi spell them: ``compat check --gpu``
takes the SKU key, nvmlDeviceGetName's name (``NVIDIA H100 80GB HBM3``), NVIDIA's product
names (``H100 SXM``, and ``H100`` for the whole family: every H100 SKU is judged), and a
near miss is refused with a "did you mean" naming the closest known names."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.compat.data import load_compat
from imagectl.core.errors import UserError

REPO = Path(__file__).resolve().parents[2]
BASE = ["compat", "check", "--driver", "580.95.05", "--cuda", "12.8.1", "--json"]


@pytest.mark.parametrize(
    ("name", "skus"),
    [
        ("NVIDIA H100 80GB HBM3", ["H100-SXM-80GB"]),  # nvidia-smi --query-gpu=name
        ("nvidia h100 80gb hbm3", ["H100-SXM-80GB"]),
        ("H100 SXM", ["H100-SXM-80GB"]),  # NVIDIA's datasheet column
        ("H100 PCIe", ["H100-PCIE"]),
        ("NVIDIA A100-SXM4-80GB", ["A100-SXM-80GB"]),
        ("A100 80GB SXM", ["A100-SXM-80GB"]),
        ("Tesla V100-SXM2-32GB", ["V100-SXM2-32GB"]),
        ("H100", ["H100-SXM-80GB", "H100-PCIE", "H100-NVL"]),  # the family: every SKU
    ],
)
def test_nvidia_and_nvidia_smi_names_are_accepted(cli, name: str, skus: list[str]) -> None:
    args = [*BASE, "--gpu", name]
    if any(load_compat(REPO / "images" / "compat").gpus[s].nvswitch for s in skus):
        args += ["--fabric-manager", "580.95.05"]
    result = cli(*args)
    assert result.code == 0, result.err + result.out
    body = result.json()
    assert body["combination"]["gpus"] == skus
    assert body["combination"]["gpu_names"] == {name: skus}


def test_family_name_is_judged_as_every_member(cli) -> None:
    result = cli(*BASE[:-1], "--gpu", "H100", "--fabric-manager", "580.95.05")
    assert result.code == 0, result.err + result.out
    assert "GPU 'H100': judged as H100-SXM-80GB, H100-PCIE, H100-NVL" in result.out
    # a fabric manager with only PCIe members is refused (FM-UNNEEDED): the family's SXM
    # member on NVSwitch is what makes it needed here
    alone = cli(*BASE, "--gpu", "H100 PCIe", "--fabric-manager", "580.95.05")
    assert {v["rule"] for v in alone.json()["violations"]} >= {"FM-UNNEEDED"}


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("H100-SXM-80G", "H100-SXM-80GB"),
        ("NVIDIA H100 80GB HBM", "NVIDIA H100 80GB HBM3"),
        ("H20O", "H200"),
        ("L40", "L40S"),
    ],
)
def test_near_miss_gets_did_you_mean(cli, name: str, suggestion: str) -> None:
    result = cli(*BASE, "--gpu", name)
    assert result.code == 2
    assert f"unknown GPU '{name}'" in result.err
    assert "did you mean" in result.err.lower()
    assert suggestion in result.err
    assert "Traceback" not in result.err


def test_stack_resolution_refuses_a_family_name() -> None:
    data = load_compat(REPO / "images" / "compat")
    assert data.gpu("NVIDIA H100 80GB HBM3").sku == "H100-SXM-80GB"
    with pytest.raises(UserError, match="several GPUs") as info:
        data.gpu("H100")
    assert "H100-SXM-80GB" in str(info.value) + (info.value.hint or "")


def test_every_name_has_a_source_and_names_known_skus() -> None:
    import yaml

    doc = yaml.safe_load((REPO / "images" / "compat" / "gpu_names.yaml").read_text())
    gpus = load_compat(REPO / "images" / "compat").gpus
    assert doc["names"]
    for name, entry in doc["names"].items():
        assert entry["source"].strip(), name
        assert entry["skus"] and all(s in gpus for s in entry["skus"]), name
