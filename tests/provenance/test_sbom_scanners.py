"""An SBOM scanners can read.

Two checks that do not go through imagectl's writer:

- an independent CycloneDX consumer, cyclonedx-python-lib's JSON deserializer
  (``Bom.from_json``: the CycloneDX project's own Python model), reads the document back:
  the distribution, each package's URL with its qualifiers, hashes and the tool;
- the fields Grype and Trivy match OS packages with, read the way their sources read
  them (``scanner_fields.yaml`` cites each file and function at a pinned commit), give the
  values written in that file for real Debian and Ubuntu packages.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import ComponentType
from packageurl import PackageURL

from imagectl.clouds.base_image import BaseImage
from imagectl.provenance.inventory import Inventory
from imagectl.provenance.sbom import render_sbom

HERE = Path(__file__).resolve().parent
FIELDS = yaml.safe_load((HERE / "scanner_fields.yaml").read_text())
CASES = FIELDS["cases"]
BASE = BaseImage(
    cloud="aws", id="ami-0a1b2c3d4e5f60718", name="ubuntu/images/hvm-ssd-gp3/ubuntu-jammy-x",
    created_at=dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc),
)  # fmt: skip


def _sbom(case: dict[str, Any], **extra: Any) -> dict[str, Any]:
    inv = Inventory.model_validate(
        {
            "schema_version": 1,
            "kernel": "6.8.0-1039-aws",
            "os": case["os"],
            "dpkg": [case["package"]],
            "python": [{"name": "PyYAML", "version": "6.0.2"}],
            "kernel_modules": [{"name": "nvidia", "version": "580.95.05"}],
        }
    )
    text = render_sbom(
        inv, stack="h100-training", stack_digest="ab" * 32, cloud="aws", build_id="b-1",
        distro="ubuntu", release="22.04", base_image=BASE, **extra,
    )  # fmt: skip
    return dict(json.loads(text))


def _props(c: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in c.get("properties", [])}


# --- Grype: Syft's CycloneDX decoder, then Grype's purl enhancers -------------------------
def _parse_distro_string(value: str) -> tuple[str, str]:
    """grype/distro/distro.go ParseDistroString: split at the first '-', ':' or '@'."""
    m = re.search(r"[-:@]", value)
    return (value[: m.start()], value[m.end() :]) if m else (value, "")


def grype_reads(doc: dict[str, Any]) -> tuple[tuple[str, str] | None, list[dict[str, Any]]]:
    """(SBOM distro, packages) as Grype has them for a CycloneDX SBOM."""
    os_components = [c for c in doc["components"] if c["type"] == "operating-system"]
    distro = (
        (os_components[0]["name"], os_components[0].get("version", "")) if os_components else None
    )
    packages = []
    for c in doc["components"]:
        if c["type"] not in ("application", "framework", "library", "machine-learning-model",
                             "firmware"):  # fmt: skip
            continue
        purl = PackageURL.from_string(c["purl"])
        q = dict(purl.qualifiers or {})
        upstreams = []
        if "upstream" in q:  # handleDefaultUpstream
            name, _, version = q["upstream"].partition("@")
            if name != purl.name:
                upstreams.append([name, version or None])
        packages.append(
            {
                "type": purl.type,
                "name": c["name"],
                "version": c["version"],
                "distro": list(_parse_distro_string(q["distro"])) if "distro" in q else None,
                "upstreams": upstreams,
            }
        )
    return distro, packages


# --- Trivy: its CycloneDX unmarshal, then pkg/sbom/io's decoder --------------------------
TRIVY_TYPES = {"application", "library", "framework", "operating-system", "platform",
               "container", "file"}  # fmt: skip


def _deb_version(v: str) -> tuple[int, str, str]:
    epoch, sep, rest = v.partition(":")
    if not sep:
        epoch, rest = "0", v
    version, dash, release = rest.rpartition("-")
    return (int(epoch), version, release) if dash else (int(epoch), rest, "")


def _format(epoch: int, version: str, release: str) -> str:
    """pkg/scan/utils/utils.go formatVersion."""
    v = f"{version}-{release}" if release else version
    return f"{epoch}:{v}" if epoch else v


def trivy_reads(doc: dict[str, Any]) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """(every OS the decoder could pick, OS packages) as Trivy has them."""
    components = [doc["metadata"]["component"], *doc["components"]]  # parseMetadataComponent
    components = [c for c in components if c["type"] in TRIVY_TYPES]  # unmarshalType
    oses = [
        (c["name"], c.get("version", "")) for c in components if c["type"] == "operating-system"
    ]
    packages = []
    for c in components:
        if "purl" not in c or not c["purl"].startswith("pkg:deb/"):
            continue  # an OS package's purl class is deb here
        props = {k.removeprefix("aquasecurity:trivy:"): v for k, v in _props(c).items()
                 if k.startswith("aquasecurity:trivy:")}  # fmt: skip
        epoch, version, release = _deb_version(c["version"])
        src_name = props.get("SrcName") or c["name"]  # fillSrcPkg's fallback: the binary
        if "SrcVersion" in props:
            src = _format(int(props.get("SrcEpoch", "0")), props["SrcVersion"],
                          props.get("SrcRelease", ""))  # fmt: skip
        else:
            src = _format(epoch, version, release)
        hashes = c.get("hashes") or []
        digest = next((f"sha256:{h['content']}" for h in hashes if h["alg"] == "SHA-256"), None)
        packages.append(
            {"ref": c["bom-ref"], "name": c["name"], "version": _format(epoch, version, release),
             "src_name": src_name, "src_version": src, "digest": digest}
        )  # fmt: skip
    return oses, packages


def _trivy_os_packages(doc: dict[str, Any]) -> set[str]:
    """addOSPkgs: what the OS component depends on; addOrphanPkgs: what nothing does."""
    deps = {d["ref"]: d.get("dependsOn", []) for d in doc["dependencies"]}
    (os_ref,) = [c["bom-ref"] for c in doc["components"] if c["type"] == "operating-system"]
    return set(deps[os_ref])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['os']['id']}-{c['package']['name']}")
def test_grype_matches_the_package_against_its_distro_and_source(case: dict[str, Any]) -> None:
    doc = _sbom(case)
    distro, packages = grype_reads(doc)
    want = case["grype"]
    assert distro is not None and list(distro) == want["distro"]
    (deb,) = [p for p in packages if p["type"] == "deb"]
    assert deb["distro"] == want["distro"]  # per package too: distroFromPURL
    assert (deb["name"], deb["version"], deb["upstreams"]) == (
        want["name"], want["version"], want["upstreams"]
    )  # fmt: skip
    assert doc["metadata"]["tools"]["components"][0]["name"] == "imagectl"  # extractDescriptor


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['os']['id']}-{c['package']['name']}")
def test_trivy_finds_one_os_and_the_source_package_its_advisories_name(
    case: dict[str, Any],
) -> None:
    doc = _sbom(case)
    oses, packages = trivy_reads(doc)
    want = case["trivy"]
    assert [list(o) for o in oses] == [want["os"]]  # exactly one: no random pick
    (deb,) = packages
    assert deb["ref"] in _trivy_os_packages(doc)
    assert (deb["name"], deb["version"], deb["src_name"], deb["src_version"], deb["digest"]) == (
        want["name"], want["version"], want["src_name"], want["src_version"], want["digest"]
    )  # fmt: skip


def test_an_independent_cyclonedx_consumer_reads_the_os_packages_and_tool() -> None:
    """cyclonedx-python-lib's deserializer (not imagectl's writer) reads it back."""
    case = CASES[0]
    doc = _sbom(case)
    bom = Bom.from_json(doc)  # type: ignore[attr-defined]
    by_type: dict[ComponentType, list[Any]] = {}
    for c in bom.components:
        by_type.setdefault(c.type, []).append(c)
    (osc,) = by_type[ComponentType.OPERATING_SYSTEM]
    assert (osc.name, osc.version) == ("debian", "12")
    debs = [c for c in by_type[ComponentType.LIBRARY] if c.purl and c.purl.type == "deb"]
    (deb,) = debs
    assert (deb.purl.namespace, deb.purl.name, deb.purl.version) == (
        "debian", "libssl3", "3.0.15-1~deb12u1"
    )  # fmt: skip
    assert deb.purl.qualifiers == {"arch": "amd64", "distro": "debian-12", "upstream": "openssl"}
    assert [(h.alg.value, h.content) for h in deb.hashes] == [
        ("SHA-256", case["package"]["sha256"])
    ]
    (tool,) = bom.metadata.tools.components
    assert tool.name == "imagectl" and tool.version
    assert bom.metadata.component.type is ComponentType.PLATFORM
    (ancestor,) = bom.metadata.component.pedigree.ancestors
    assert ancestor.version == BASE.id
    (kmod,) = by_type[ComponentType.DEVICE_DRIVER]
    assert kmod.name == "nvidia"
    os_dep = next(d for d in bom.dependencies if d.ref == osc.bom_ref)
    assert {d.ref for d in os_dep.dependencies} == {deb.bom_ref}


def test_an_inventory_without_os_release_falls_back_to_the_stack_pins() -> None:
    """Builds recorded before the manifest role read os-release: the stack's distro."""
    case = {**CASES[3], "os": None}
    doc = _sbom(case)
    (osc,) = [c for c in doc["components"] if c["type"] == "operating-system"]
    assert (osc["name"], osc["version"]) == ("ubuntu", "22.04")
    assert _props(osc)["imagectl:os-release"] == "the stack's pins"


def test_building_does_not_import_jsonschema() -> None:
    """jsonschema's import compiles a grammar (1-4 s): only an SBOM check loads it."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import imagectl.building.stage"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "imagectl.provenance.sbom" in imported
    assert not {m for m in imported if m.split(".")[0] in ("jsonschema", "rfc3987_syntax")}
