"""The image's CycloneDX SBOM, rendered from its inventory with cyclonedx-python-lib.

Components (https://cyclonedx.org/docs/1.6/json/): every dpkg package
(``pkg:deb/<distro>/<name>@<version>?arch=..``, its source package as a property), the
validator venv's Python packages (``pkg:pypi``), the kernel (``operating-system``) and the
NVIDIA kernel modules (``device-driver``, with version, vermagic and srcversion as
properties). The image itself is the BOM's metadata component, named by stack and build.
The document is checked against the CycloneDX 1.6 JSON schema before it is written.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cyclonedx.model import Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from imagectl.errors import UserError
from imagectl.provenance.inventory import Inventory

SPEC = "1.6"


def render_sbom(
    inv: Inventory, *, stack: str, stack_digest: str, cloud: str, build_id: str, distro: str
) -> str:
    """The SBOM as JSON text (CycloneDX 1.6), validated against its schema."""

    def props(**values: str | None) -> list[Any]:
        return [Property(name=f"imagectl:{k}", value=v) for k, v in values.items() if v]

    bom = Bom()
    bom.metadata.component = Component(
        name=stack,
        version=build_id,
        type=ComponentType.OPERATING_SYSTEM,
        bom_ref=f"image:{cloud}:{build_id}",
        properties=props(**{"stack-digest": stack_digest, "cloud": cloud}),
    )
    for p in inv.dpkg:
        bom.components.add(
            Component(
                name=p.name,
                version=p.version,
                type=ComponentType.LIBRARY,
                bom_ref=f"deb:{p.name}:{p.arch}",
                purl=PackageURL("deb", distro, p.name, p.version, {"arch": p.arch}),
                properties=props(**{"deb-source": f"{p.source} {p.source_version}"}),
            )
        )
    for py in inv.python:
        bom.components.add(
            Component(
                name=py.name,
                version=py.version,
                type=ComponentType.LIBRARY,
                bom_ref=f"pypi:{py.name.lower()}",
                purl=PackageURL("pypi", None, py.name.lower(), py.version),
                properties=props(location="the validator's venv"),
            )
        )
    bom.components.add(
        Component(
            name="linux",
            version=inv.kernel,
            type=ComponentType.OPERATING_SYSTEM,
            bom_ref=f"kernel:{inv.kernel}",
        )
    )
    for m in inv.kernel_modules:
        bom.components.add(
            Component(
                name=m.name,
                version=m.version,
                type=ComponentType.DEVICE_DRIVER,
                bom_ref=f"kmod:{m.name}",
                properties=props(
                    vermagic=m.vermagic,
                    srcversion=m.srcversion,
                    license=m.license,
                    filename=m.filename,
                ),
            )
        )
    bom.register_dependency(bom.metadata.component, list(bom.components))  # the image holds all
    text: str = JsonV1Dot6(bom).output_as_string(indent=2)
    check_sbom(text, where=f"the SBOM of build {build_id}")
    return text


def check_sbom(text: str, *, where: str) -> None:
    """Exit 2 unless ``text`` is a CycloneDX 1.6 JSON document (its published schema)."""
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise UserError(f"{where} is not a valid CycloneDX {SPEC} document: {error}")


def sbom_digest(text: str) -> str:
    return "sha256-" + hashlib.sha256(text.encode()).hexdigest()


def component_count(text: str) -> int:
    return len(json.loads(text).get("components") or [])
