"""An Azure validation size that boots Generation 2 VMs only (ND H100 v5: "requires the use
of Generation 2 VMs and marketplace images", Microsoft Learn) with a V1 image definition is
refused by `imagectl lint` before any spend (AZURE-GEN2-ONLY, an error, naming the field,
the fix and the source; pipeline/clouds/azure/vm_sizes.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imagectl.clouds.azure.vm_sizes import gen2_only

STACK = "h100-training"


def _generation(root: Path, value: str) -> None:
    path = root / "images" / "stacks" / f"{STACK}.yaml"
    text = path.read_text()
    marker = "      image_definition: h100-training\n"
    assert marker in text
    path.write_text(text.replace(marker, marker + f"      hyper_v_generation: {value}\n", 1))


def test_a_v1_definition_for_a_gen2_only_size_is_refused(cli: Any, workspace_copy: Path) -> None:
    _generation(workspace_copy, "V1")
    result = cli("--root", str(workspace_copy), "lint", "--stack", STACK)
    out = result.out + result.err
    assert result.code == 1, out  # a lint error, as every compat rule's
    assert "AZURE-GEN2-ONLY" in out and "Standard_ND96isr_H100_v5" in out
    assert "hyper_v_generation" in out or f"{STACK}.yaml" in out
    assert "Traceback" not in out


def test_v2_passes(cli: Any, workspace_copy: Path) -> None:
    _generation(workspace_copy, "V2")
    result = cli("--root", str(workspace_copy), "lint", "--stack", STACK)
    assert result.code == 0, result.out + result.err


def test_the_data_names_a_source_for_the_shipped_sizes() -> None:
    assert gen2_only("Standard_ND96isr_H100_v5")
    assert gen2_only("Standard_D8s_v5") is None
