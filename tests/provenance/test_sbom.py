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
from typing import Any

import pytest
from packageurl import PackageURL

from imagectl.core.errors import UserError
from imagectl.provenance.inventory import Inventory, load_inventory, parse_inventory
from imagectl.provenance.sbom import check_sbom, render_sbom
from tests.support import require, require_tool

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


def _writer() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("write_inventory", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# deb822 (deb822(5)): stanzas separated by blank lines, a line of only blanks included;
# continuation lines start with a blank (a "Package:" there is text, not a field); the
# Package field need not come first.
PACKAGES = (
    "Package: bash\nVersion: 5.2.15-2+b7\nArchitecture: amd64\nSHA256: aa\n\n"
    "Package: dash\nVersion: 0.5.12-2\nArchitecture: amd64\nSHA256: bb\n   \n"
    "Version: 1.0\nPackage: tzdata\nArchitecture: all\nDescription: x\n Package: bash\n"
    "SHA256: cc\n\n\n"
    "Package: zsh\nVersion: 5.9-4\nDescription: y\n Package: dash\nSHA256: dd\n"
    "\t\nPackage: bash\nVersion: 5.2.15-2\nArchitecture: amd64\nSHA256: ee\n"
)


@pytest.mark.parametrize(
    "names", [{"bash"}, {"tzdata"}, {"dash", "tzdata"}, {"zsh"}, set(), {"nope"}]
)
def test_picking_the_installed_stanzas_reads_what_reading_all_of_them_read(
    names: set[str],
) -> None:
    writer = _writer()
    every = [s for s in writer._stanzas(PACKAGES) if s[0] in names]
    assert list(writer._stanzas_of(PACKAGES, names)) == every
    if names == {"bash"}:
        assert [s[3] for s in every] == ["aa", "ee"]  # not tzdata's or zsh's continuation


def test_on_this_machines_own_package_indexes() -> None:
    writer = _writer()
    lists = sorted(Path("/var/lib/apt/lists").glob("*_Packages*"))
    helper = Path(writer.APT_HELPER)
    require(bool(lists) and helper.exists(), "no apt package indexes (apt-get update)")
    text = subprocess.run([str(helper), "cat-file", str(lists[0])], capture_output=True,
                          text=True, check=True, timeout=120).stdout  # fmt: skip
    every = list(writer._stanzas(text))
    names = {s[0] for s in every[::97]} | {"bash"}
    assert list(writer._stanzas_of(text, names)) == [s for s in every if s[0] in names]
