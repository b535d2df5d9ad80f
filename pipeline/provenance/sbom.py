"""The image's CycloneDX SBOM, rendered from its inventory, checked against the published
CycloneDX 1.6 JSON schema (the copy cyclonedx-python-lib ships) before it is written.

Laid out for vulnerability scanners (https://cyclonedx.org/docs/1.6/json/):

- the image is the BOM's metadata component (type ``platform``: a second
  ``operating-system`` component would leave Trivy to pick one of the two at random,
  ``pkg/sbom/io/decode.go``), named by stack and build; its base image is its
  ``pedigree.ancestors`` entry (the cloud's id for it: known ancestry);
- the first component is the distribution (type ``operating-system``, name = os-release
  ``ID``, version = ``VERSION_ID``, e.g. ``debian`` ``12``): Syft/Grype take the first such
  component as the distro (syft ``format/internal/cyclonedxutil/helpers/decoder.go``),
  Trivy takes its name as the OS family and its version as the release
  (``pkg/sbom/io/decode.go``). It depends on every dpkg package (Trivy's OS packages
  are the ones the OS component depends on);
- every dpkg package: ``pkg:deb/<ID>/<name>@<version>?arch=..&distro=<ID>-<VERSION_ID>``
  (the purl deb type, with the ``distro`` value Syft writes and Grype parses), the
  source package as Syft's ``upstream=`` qualifier (Grype matches Debian and Ubuntu
  advisories by source package) and as Trivy's ``aquasecurity:trivy:SrcName`` /
  ``SrcVersion`` / ``SrcRelease`` / ``SrcEpoch`` properties (Trivy reads the source
  package only from these: ``fillPkgFieldsFromComponentProps``), and the .deb's SHA-256
  from apt's index where the image had one (dpkg keeps none);
- the validator venv's Python packages (``pkg:pypi``) and the NVIDIA kernel modules
  (``device-driver``, with version, vermagic and srcversion as properties);
- ``metadata.tools``: imagectl and its version, the tool that made the document.

Linear in the packages: the document is built as plain JSON (cyclonedx-python-lib's
model looks every dependency up in a list, and jsonschema's ``uniqueItems`` compares
every pair of objects: 1,000 packages took 6 s, 5,000 over 30 s), and the schema is
checked with ``uniqueItems`` by hashing each item's canonical JSON.
``benchmarks/sbom_record.py`` prints the time per 1,000 packages. jsonschema is imported
only when a document is checked (its import compiles a grammar: seconds that every
``imagectl build`` invocation would pay at start).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from packageurl import PackageURL

from imagectl import __version__
from imagectl.clouds.base_image import BaseImage
from imagectl.core.boundedjson import parse_bounded
from imagectl.core.errors import UserError
from imagectl.provenance.inventory import DebPackage, Inventory, OsRelease

SPEC = "1.6"
SCHEMA_URI = "http://cyclonedx.org/schema/bom-1.6.schema.json"
# the tool that makes the document (metadata.tools, CycloneDX >= 1.5's form)
TOOL = {
    "type": "application",
    "name": "imagectl",
    "version": __version__,
    "description": "imagectl.provenance.sbom, from the image's inventory",
}
TRIVY = "aquasecurity:trivy:"  # Trivy's property namespace (pkg/sbom/cyclonedx/marshal.go)

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator


def _props(**values: str | None) -> list[dict[str, str]]:
    return [{"name": f"imagectl:{k}", "value": v} for k, v in values.items() if v]


def _component(
    kind: str, name: str, version: str | None, ref: str, **extra: object
) -> dict[str, object]:
    out: dict[str, object] = {"type": kind, "bom-ref": ref, "name": name}
    if version:
        out["version"] = version
    out.update({k: v for k, v in extra.items() if v})
    return out


def debian_version(version: str) -> tuple[int, str, str]:
    """(epoch, upstream version, Debian revision) of a Debian version
    (deb-version(7): ``[epoch:]upstream_version[-debian_revision]``)."""
    epoch, sep, rest = version.partition(":")
    if not sep or not epoch.isdigit():
        epoch, rest = "0", version
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    return int(epoch), upstream, revision


def _upstream(p: DebPackage) -> str | None:
    """Syft's ``upstream`` qualifier: the source package, ``@version`` when its version
    differs from the binary's (syft ``pkg/cataloger/debian/package.go``)."""
    if p.source == p.name and p.source_version == p.version:
        return None
    return f"{p.source}@{p.source_version}" if p.source_version != p.version else p.source


def _trivy_source(p: DebPackage) -> list[dict[str, str]]:
    epoch, upstream, revision = debian_version(p.source_version)
    values = {"SrcName": p.source, "SrcVersion": upstream, "SrcRelease": revision,
              "SrcEpoch": str(epoch) if epoch else ""}  # fmt: skip
    return [{"name": TRIVY + k, "value": v} for k, v in values.items() if v]


def _deb(p: DebPackage, os_id: str, distro: str) -> dict[str, object]:
    qualifiers = {"arch": p.arch, "distro": distro}
    upstream = _upstream(p)
    if upstream:
        qualifiers["upstream"] = upstream
    hashes = [{"alg": "SHA-256", "content": p.sha256}] if p.sha256 else None
    return _component(
        "library", p.name, p.version, f"deb:{p.name}:{p.arch}",
        hashes=hashes,
        purl=PackageURL("deb", os_id, p.name, p.version, qualifiers).to_string(),
        properties=_props(**{"deb-source": f"{p.source} {p.source_version}"}) + _trivy_source(p),
    )  # fmt: skip


def _os_component(inv: Inventory, osr: OsRelease, reported: bool) -> dict[str, object]:
    return _component(
        "operating-system", osr.id, osr.version_id, f"os:{osr.id}-{osr.version_id or ''}",
        description=osr.pretty_name,
        properties=_props(
            codename=osr.version_codename, kernel=inv.kernel,
            **{"os-release": "the image's os-release" if reported else "the stack's pins"},
        ),
    )  # fmt: skip


def _base_ancestor(base: BaseImage) -> dict[str, object]:
    return _component(
        "platform", base.name or base.id, base.id, f"base-image:{base.cloud}:{base.id}",
        description=f"the {base.cloud} base image the candidate was built on",
        properties=_props(**{"base-image-id": base.id, "base-image-source": base.source,
                             "base-image-query": base.query, "cloud": base.cloud,
                             "created": base.created_at.isoformat() if base.created_at else None}),
    )  # fmt: skip


def render_sbom(
    inv: Inventory,
    *,
    stack: str,
    stack_digest: str,
    cloud: str,
    build_id: str,
    distro: str,
    release: str | None = None,
    base_image: BaseImage | None = None,
) -> str:
    """The SBOM as JSON text (CycloneDX 1.6), validated against its schema.

    ``distro`` and ``release`` are the stack's pins, used only for an inventory that
    carries no os-release (builds before it was read); what the image reported wins."""
    image_ref = f"image:{cloud}:{build_id}"
    osr = inv.os or OsRelease(id=distro, version_id=release)
    os_ref = f"os:{osr.id}-{osr.version_id or ''}"
    distro_q = f"{osr.id}-{osr.version_id}" if osr.version_id else osr.id
    debs = [_deb(p, osr.id, distro_q) for p in inv.dpkg]
    others = [
        *(
            _component(
                "device-driver", m.name, m.version, f"kmod:{m.name}",
                properties=_props(vermagic=m.vermagic, srcversion=m.srcversion,
                                  license=m.license, filename=m.filename),
            )
            for m in inv.kernel_modules
        ),
        *(
            _component(
                "library", py.name, py.version, f"pypi:{py.name.lower()}",
                purl=PackageURL("pypi", None, py.name.lower(), py.version).to_string(),
                properties=_props(location="the validator's venv"),
            )
            for py in inv.python
        ),
    ]  # fmt: skip
    components = [_os_component(inv, osr, inv.os is not None), *debs, *others]
    image = _component(
        "platform", stack, build_id, image_ref,
        description=f"imagectl {cloud} image of stack {stack}, build {build_id}",
        properties=_props(**{"stack-digest": stack_digest, "cloud": cloud,
                             "base-image": base_image.id if base_image else None}),
    )  # fmt: skip
    if base_image is not None:
        image["pedigree"] = {"ancestors": [_base_ancestor(base_image)]}
    doc = {
        "$schema": SCHEMA_URI,
        "bomFormat": "CycloneDX",
        "specVersion": SPEC,
        "serialNumber": uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(),
            "tools": {"components": [TOOL]},
            "component": image,
        },
        "components": components,
        # the image holds the OS, the validator's packages and the kernel modules; the OS
        # holds every dpkg package (Trivy's OS packages); the rest depend on nothing known
        "dependencies": [
            {"ref": image_ref, "dependsOn": [os_ref, *(c["bom-ref"] for c in others)]},
            {"ref": os_ref, "dependsOn": [c["bom-ref"] for c in debs]},
            *({"ref": c["bom-ref"]} for c in [*debs, *others]),
        ],
    }
    check_sbom_document(doc, where=f"the SBOM of build {build_id}")
    return json.dumps(doc, indent=2)


def _unique_items(
    validator: Validator, unique: bool, instance: object, schema: object
) -> Iterator[ValidationError]:
    """JSON Schema's ``uniqueItems`` in linear time: each item's canonical JSON hashed
    (jsonschema's own compares every pair of objects)."""
    from jsonschema import ValidationError

    if not unique or not isinstance(instance, list) or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        key = json.dumps(item, sort_keys=True)
        if key in seen:
            yield ValidationError(f"{key[:200]} is not unique (uniqueItems)")
            return
        seen.add(key)


@functools.cache
def _validator() -> Validator:
    """Draft 7 with the CycloneDX 1.6 strict schema and the schemas it references, as
    cyclonedx-python-lib's JsonStrictValidator builds it, but a linear ``uniqueItems``.
    Imported here, on the first check: jsonschema's import costs seconds."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.schema._res import BOM_JSON_STRICT, CRYPTOGRAPHY_DEFS, JSF, SPDX_JSON
    from jsonschema.validators import Draft7Validator, extend
    from referencing import Registry
    from referencing.jsonschema import DRAFT7

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


def _parsed(text: str, where: str) -> object:
    """An SBOM's JSON, measured before parsing (``imagectl.core.boundedjson``)."""
    return parse_bounded(
        text, kind="SBOM", where=where, hint="Render the SBOM again from the build",
        max_bytes=256 << 20, max_depth=32,
    )  # fmt: skip


def check_sbom(text: str, *, where: str) -> None:
    """``check_sbom_document`` of JSON text."""
    check_sbom_document(_parsed(text, where), where=where)


def sbom_digest(text: str) -> str:
    return "sha256-" + hashlib.sha256(text.encode()).hexdigest()


def component_count(text: str) -> int:
    doc = _parsed(text, "the SBOM")
    return len(doc.get("components") or []) if isinstance(doc, dict) else 0
