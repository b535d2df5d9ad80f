"""The image's CycloneDX SBOM, rendered from its inventory, checked against the published
CycloneDX 1.6 JSON schema (the copy cyclonedx-python-lib ships) before it is written.

Components (https://cyclonedx.org/docs/1.6/json/): every dpkg package
(``pkg:deb/<distro>/<name>@<version>?arch=..``, its source package as a property), the
validator venv's Python packages (``pkg:pypi``), the kernel (``operating-system``) and the
NVIDIA kernel modules (``device-driver``, with version, vermagic and srcversion as
properties). The image itself is the BOM's metadata component, named by stack and build,
and depends on every component.

Linear in the packages: the document is built as plain JSON (cyclonedx-python-lib's
model looks every dependency up in a list, and jsonschema's ``uniqueItems`` compares
every pair of objects: 1,000 packages took 6 s, 5,000 over 30 s), and the schema is
checked with ``uniqueItems`` by hashing each item's canonical JSON.
``benchmarks/sbom_record.py`` prints the time per 1,000 packages.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

from cyclonedx.schema import SchemaVersion
from cyclonedx.schema._res import BOM_JSON_STRICT, CRYPTOGRAPHY_DEFS, JSF, SPDX_JSON
from jsonschema import ValidationError
from jsonschema.validators import Draft7Validator, extend
from packageurl import PackageURL
from referencing import Registry
from referencing.jsonschema import DRAFT7

from imagectl.errors import UserError
from imagectl.provenance.inventory import Inventory

SPEC = "1.6"
SCHEMA_URI = "http://cyclonedx.org/schema/bom-1.6.schema.json"


def _props(**values: str | None) -> list[dict[str, str]]:
    return [{"name": f"imagectl:{k}", "value": v} for k, v in values.items() if v]


def _component(kind: str, name: str, version: str | None, ref: str, **extra: Any) -> dict:
    out: dict[str, Any] = {"type": kind, "bom-ref": ref, "name": name}
    if version:
        out["version"] = version
    out.update({k: v for k, v in extra.items() if v})
    return out


def _components(inv: Inventory, distro: str) -> Iterator[dict[str, Any]]:
    yield _component("operating-system", "linux", inv.kernel, f"kernel:{inv.kernel}")
    for m in inv.kernel_modules:
        yield _component(
            "device-driver", m.name, m.version, f"kmod:{m.name}",
            properties=_props(vermagic=m.vermagic, srcversion=m.srcversion, license=m.license,
                              filename=m.filename),
        )  # fmt: skip
    for p in inv.dpkg:
        yield _component(
            "library", p.name, p.version, f"deb:{p.name}:{p.arch}",
            purl=PackageURL("deb", distro, p.name, p.version, {"arch": p.arch}).to_string(),
            properties=_props(**{"deb-source": f"{p.source} {p.source_version}"}),
        )  # fmt: skip
    for py in inv.python:
        yield _component(
            "library", py.name, py.version, f"pypi:{py.name.lower()}",
            purl=PackageURL("pypi", None, py.name.lower(), py.version).to_string(),
            properties=_props(location="the validator's venv"),
        )  # fmt: skip


def render_sbom(
    inv: Inventory, *, stack: str, stack_digest: str, cloud: str, build_id: str, distro: str
) -> str:
    """The SBOM as JSON text (CycloneDX 1.6), validated against its schema."""
    image_ref = f"image:{cloud}:{build_id}"
    components = list(_components(inv, distro))
    doc = {
        "$schema": SCHEMA_URI,
        "bomFormat": "CycloneDX",
        "specVersion": SPEC,
        "serialNumber": uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(),
            "component": _component(
                "operating-system",
                stack,
                build_id,
                image_ref,
                properties=_props(**{"stack-digest": stack_digest, "cloud": cloud}),
            ),
        },
        "components": components,
        "dependencies": [  # the image holds every component; they depend on nothing known
            {"ref": image_ref, "dependsOn": [c["bom-ref"] for c in components]},
            *({"ref": c["bom-ref"]} for c in components),
        ],
    }
    check_sbom_document(doc, where=f"the SBOM of build {build_id}")
    return json.dumps(doc, indent=2)


def _unique_items(validator: Any, unique: bool, instance: Any, schema: Any) -> Iterator[Any]:
    """JSON Schema's ``uniqueItems`` in linear time: each item's canonical JSON hashed
    (jsonschema's own compares every pair of objects)."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        key = json.dumps(item, sort_keys=True)
        if key in seen:
            yield ValidationError(f"{key[:200]} is not unique (uniqueItems)")
            return
        seen.add(key)


@functools.cache
def _validator() -> Any:
    """Draft 7 with the CycloneDX 1.6 strict schema and the schemas it references, as
    cyclonedx-python-lib's JsonStrictValidator builds it, but a linear ``uniqueItems``."""

    def resource(path: str) -> Any:
        with open(path, encoding="utf-8") as fh:
            return DRAFT7.create_resource(json.load(fh))

    prefix = "http://cyclonedx.org/schema/"
    registry: Registry[Any] = Registry().with_resources(
        [
            (f"{prefix}spdx.SNAPSHOT.schema.json", resource(SPDX_JSON)),
            (f"{prefix}cryptography-defs.SNAPSHOT.schema.json", resource(CRYPTOGRAPHY_DEFS)),
            (f"{prefix}jsf-0.82.SNAPSHOT.schema.json", resource(JSF)),
        ]
    )
    schema_file = BOM_JSON_STRICT[SchemaVersion.V1_6]
    assert schema_file is not None
    with open(schema_file, encoding="utf-8") as fh:
        schema = json.load(fh)
    cls = extend(Draft7Validator, {"uniqueItems": _unique_items})
    return cls(schema, registry=registry, format_checker=Draft7Validator.FORMAT_CHECKER)


def check_sbom_document(doc: Any, *, where: str) -> None:
    """Exit 2 unless ``doc`` is a CycloneDX 1.6 JSON document (its published schema)."""
    error = next(iter(_validator().iter_errors(doc)), None)
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise UserError(f"{where} is not a valid CycloneDX {SPEC} document: {at}: {error.message}")


def check_sbom(text: str, *, where: str) -> None:
    """``check_sbom_document`` of JSON text."""
    check_sbom_document(json.loads(text), where=where)


def sbom_digest(text: str) -> str:
    return "sha256-" + hashlib.sha256(text.encode()).hexdigest()


def component_count(text: str) -> int:
    return len(json.loads(text).get("components") or [])
