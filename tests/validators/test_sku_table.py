"""The GPU table (images/compat/gpus.yaml) holds the PCIe link each SKU trains to and its
power range, once. PCIe:
gpu.pcie.link_max reads it through a shape's expectations (Hardware.pcie_gen/width) and
load.pcie_link through the floors (floors_for(...)["pcie"]). Before, shapes.yaml's hardware
blocks and floors.yaml each typed it, and the two checks read different copies.

- Every GPU shape: the expectations' link and the floors' link are the GPU table's entry.
- No shape row and no floors entry carries its own copy; a shape file that does is refused
  (exit 2 naming the shape and the field), not silently overridden.
- The table is what both readers read: a changed link in a copy of the tree is what the
  shape's expectations of that copy expect.
- Power: every GPU shape expects its SKU's range (H100 NVL 350-400 W); a shape sets its own
  limit only with the cloud's page cited (power_source), else it is refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from validator_support import ROOT

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import loads as load_yaml
from imagectl.validators.compute.floors import floors_for, load_floors
from imagectl.validators.expectations import hardware_for
from imagectl.validators.shapes import gpu_pcie, gpu_power, gpu_rows, shape_rows

IMAGES = ROOT / "images"
GPU_SHAPES = {n: r for n, r in shape_rows(IMAGES / "catalog").items() if r.get("gpu")}


@pytest.mark.parametrize("shape", sorted(GPU_SHAPES))
def test_both_pcie_checks_read_the_gpu_tables_link(shape: str) -> None:
    sku = GPU_SHAPES[shape]["gpu"]
    link = gpu_pcie(IMAGES / "compat", sku)
    assert link and link["source"].strip(), f"{sku}: no sourced pcie in the GPU table"
    _, hw = hardware_for(IMAGES, shape)
    assert hw is not None
    assert (hw.pcie_gen, hw.pcie_width) == (link["gen"], link["width"])  # gpu.pcie.link_max
    floor = floors_for(sku, shape)["pcie"]  # load.pcie_link (compute/recorded.py)
    assert (floor["gen"], floor["width"]) == (link["gen"], link["width"])


def test_no_second_copy() -> None:
    for name, row in shape_rows(IMAGES / "catalog").items():
        assert not {"pcie_gen", "pcie_width"} & set(row), name
    for sku, entry in (load_floors().get("gpus") or {}).items():
        assert "pcie" not in entry, f"floors.yaml {sku} types the PCIe link again"
    assert set(gpu_rows(IMAGES / "compat")) >= {r["gpu"] for r in GPU_SHAPES.values()}


def _tree(tmp_path: Path) -> Path:
    images = tmp_path / "images"
    shutil.copytree(IMAGES, images)
    return images


def test_a_changed_link_in_the_table_is_what_the_shape_expects(tmp_path: Path) -> None:
    images = _tree(tmp_path)
    table = images / "compat" / "gpus.yaml"
    text = table.read_text(encoding="utf-8")
    old = 'pcie: {gen: 5, width: 16, source: "NVIDIA H100 datasheet (SXM): PCIe Gen5 x16"}'
    assert old in text
    table.write_text(text.replace(old, old.replace("width: 16", "width: 8")), encoding="utf-8")
    _, hw = hardware_for(images, "p5.48xlarge")
    assert hw is not None and (hw.pcie_gen, hw.pcie_width) == (5, 8)


def test_a_shape_that_types_the_link_again_is_refused(tmp_path: Path) -> None:
    images = _tree(tmp_path)
    shapes = images / "catalog" / "shapes.yaml"
    text = shapes.read_text(encoding="utf-8")
    row = "  p5.48xlarge:             {<<: *h100_sxm, "
    assert row in text
    shapes.write_text(text.replace(row, row + "pcie_gen: 4, "), encoding="utf-8")
    assert load_yaml(shapes.read_text(encoding="utf-8"))["shapes"]["p5.48xlarge"]["pcie_gen"] == 4
    with pytest.raises(UserError) as err:
        hardware_for(images, "p5.48xlarge")
    text = " ".join(str(err.value).split())
    assert "p5.48xlarge" in text and "pcie_gen" in text and "gpus.yaml" in text


@pytest.mark.parametrize("shape", sorted(GPU_SHAPES))
def test_every_shape_expects_its_gpus_power_range(shape: str) -> None:
    sku = GPU_SHAPES[shape]["gpu"]
    power = gpu_power(IMAGES / "compat", sku)
    assert power and power["source"].strip(), f"{sku}: no sourced power in the GPU table"
    assert "power_limit_w" not in GPU_SHAPES[shape] and "power_limit_min_w" not in GPU_SHAPES[shape]
    _, hw = hardware_for(IMAGES, shape)
    assert hw is not None
    assert (hw.power_limit_w, hw.power_limit_min_w) == (power["max_w"], power.get("min_w"))
    if sku == "H100-NVL":  # NVIDIA's configurable 350-400 W
        assert (hw.power_limit_min_w, hw.power_limit_w) == (350, 400)


def test_a_shape_limit_needs_the_clouds_page(tmp_path: Path) -> None:
    images = _tree(tmp_path)
    shapes = images / "catalog" / "shapes.yaml"
    text = shapes.read_text(encoding="utf-8")
    row = "  p5.48xlarge:             {<<: *h100_sxm, "
    shapes.write_text(text.replace(row, row + "power_limit_w: 600, "), encoding="utf-8")
    with pytest.raises(UserError) as err:
        hardware_for(images, "p5.48xlarge")
    assert "power_source" in " ".join(str(err.value).split())
    cited = 'power_limit_w: 600, power_source: "a cloud page", '
    other = _tree(tmp_path / "cited")  # the tables are read once per tree
    (other / "catalog" / "shapes.yaml").write_text(text.replace(row, row + cited), "utf-8")
    _, hw = hardware_for(other, "p5.48xlarge")
    assert hw is not None and (hw.power_limit_w, hw.power_limit_min_w) == (600, None)
