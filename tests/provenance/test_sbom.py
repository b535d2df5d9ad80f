"""The image SBOM: rendered from a real inventory, valid CycloneDX 1.6.

The inventory comes from the manifest role's own script run against this machine's
dpkg database (ground truth, as the role runs it in the image). The schema check is
cyclonedx-python-lib's JsonStrictValidator with the published CycloneDX 1.6 JSON schema
(https://cyclonedx.org/docs/1.6/json/), which the library ships.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packageurl import PackageURL

from imagectl.errors import UserError
from imagectl.provenance.inventory import Inventory, load_inventory, parse_inventory
from imagectl.provenance.sbom import check_sbom, render_sbom
from tests.support import require_tool

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "playbooks" / "roles" / "manifest" / "files" / "write-inventory.py"


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    require_tool("dpkg-query")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--kernel", "6.8.0-1024-aws",
         "--validator-venv", str(Path(sys.executable).parents[1])],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return parse_inventory(proc.stdout, "write-inventory.py output")


def _render(inv: Inventory) -> str:
    return render_sbom(
        inv, stack="h100-training", stack_digest="ab" * 32, cloud="aws", build_id="b-1",
        distro="ubuntu",
    )  # fmt: skip


def test_the_sbom_is_valid_cyclonedx_and_lists_every_package_with_its_source(
    inventory: Inventory,
) -> None:
    # imported here: jsonschema's import builds rfc3987-syntax's grammars (seconds), which
    # every worker would pay while collecting
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert len(inventory.dpkg) > 50 and inventory.python  # a real system, a real venv
    text = _render(inventory)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc["specVersion"] == "1.6"
    assert inventory.os is not None  # this machine's os-release, as the image's is read
    debs = {c["name"]: c for c in doc["components"] if c["bom-ref"].startswith("deb:")}
    assert set(debs) == {p.name for p in inventory.dpkg}
    for p in inventory.dpkg:
        c = debs[p.name]
        assert c["version"] == p.version
        purl = PackageURL.from_string(c["purl"])
        assert (purl.type, purl.namespace, purl.name, purl.version) == (
            "deb", inventory.os.id, p.name, p.version
        )  # fmt: skip
        assert purl.qualifiers["distro"] == f"{inventory.os.id}-{inventory.os.version_id}"
        props = {x["name"]: x["value"] for x in c["properties"]}
        assert props["imagectl:deb-source"] == f"{p.source} {p.source_version}"
    pypi = {c["name"] for c in doc["components"] if c["bom-ref"].startswith("pypi:")}
    assert pypi == {p.name for p in inventory.python}
    (osc,) = [c for c in doc["components"] if c["type"] == "operating-system"]
    assert (osc["name"], osc["version"]) == (inventory.os.id, inventory.os.version_id)
    props = {x["name"]: x["value"] for x in osc["properties"]}
    assert props["imagectl:kernel"] == "6.8.0-1024-aws"


def test_kernel_modules_are_device_drivers_with_their_vermagic(inventory: Inventory) -> None:
    """modinfo's fields for nvidia.ko as NVIDIA's 580 open module reports them."""
    module = {
        "name": "nvidia", "version": "580.95.05", "srcversion": "3A6F2B0C5D9E8F7A6B5C4D3",
        "vermagic": "6.8.0-1024-aws SMP mod_unload modversions", "license": "Dual MIT/GPL",
        "filename": "/lib/modules/6.8.0-1024-aws/updates/dkms/nvidia.ko.zst",
    }  # fmt: skip
    inv = Inventory.model_validate({**inventory.model_dump(), "kernel_modules": [module]})
    doc = json.loads(_render(inv))
    (kmod,) = [c for c in doc["components"] if c["type"] == "device-driver"]
    props = {x["name"]: x["value"] for x in kmod["properties"]}
    assert kmod["version"] == "580.95.05"
    assert props["imagectl:vermagic"] == module["vermagic"]


def test_a_document_that_breaks_the_schema_is_refused() -> None:
    bad = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
                      "components": [{"type": "gadget", "name": "x"}]})  # fmt: skip
    with pytest.raises(UserError, match="not a valid CycloneDX 1.6 document"):
        check_sbom(bad, where="a test document")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"schema_version": 1, "kernel": "k", "dpkg": [{"name": "x"}], "python": [], '
         '"kernel_modules": []}', "dpkg.0.version"),
        ('{"schema_version": 9, "kernel": "k", "dpkg": [], "python": [], "kernel_modules": []}',
         "schema_version"),
    ],
)  # fmt: skip
def test_a_corrupt_inventory_names_the_file_and_the_field(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "inventory.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message) as err:
        load_inventory(path)
    assert str(path) in err.value.render()
