"""After a build: the image's SBOM beside the build record and in the catalog.

The manifest role fetched the image's inventory and manifest into ``<build
folder>/image/``; ``record_build_sbom`` renders ``<build folder>/sbom.cdx.json`` and
stores it with the inventory and the held (pinned) packages for ``imagectl diff``;
``record_manifest_digest`` stores the sha256 of the fetched manifest on the build: the
digest the attestation names (never a host's report). A build that ran no provisioning
(``--skip-provisioning``, a test build) has no inventory and gets no SBOM: it returns
None.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.models import Build
from imagectl.errors import UserError
from imagectl.fsutil import atomic_write
from imagectl.provenance.inventory import IMAGE_FOLDER, INVENTORY_FILE, load_inventory
from imagectl.provenance.sbom import render_sbom, sbom_digest
from imagectl.stacks.resolve import ResolvedStack

SBOM_FILE = "sbom.cdx.json"


def _held(manifest_file: Path) -> list[str]:
    try:
        doc = json.loads(manifest_file.read_text())
    except OSError:
        return []  # no manifest fetched: nothing known to be held
    except ValueError as exc:
        raise UserError(
            f"the image manifest is not JSON: {exc}", where=str(manifest_file)
        ) from None
    held = doc.get("held") if isinstance(doc, dict) else None
    return sorted(str(h) for h in held) if isinstance(held, list) else []


def record_manifest_digest(catalog: Catalog, build_pk: int, folder: Path) -> str | None:
    """The sha256 of ``<build folder>/image/manifest.json`` as fetched, on the build row."""
    try:
        digest = hashlib.sha256((folder / IMAGE_FOLDER / "manifest.json").read_bytes()).hexdigest()
    except OSError:
        return None  # no provisioning ran: the image has no manifest to attest
    with catalog.transaction() as s:
        build = s.get(Build, build_pk)
        if build is not None:
            build.manifest_sha256 = digest
    return digest


def record_build_sbom(
    catalog: Catalog,
    build_pk: int,
    build_id: str,
    folder: Path,
    resolved: ResolvedStack,
    cloud: str,
) -> Path | None:
    image_dir = folder / IMAGE_FOLDER
    inventory_file = image_dir / INVENTORY_FILE
    if not inventory_file.is_file():
        return None
    inv = load_inventory(inventory_file)
    text = render_sbom(
        inv,
        stack=resolved.name,
        stack_digest=resolved.digest,
        cloud=cloud,
        build_id=build_id,
        distro=resolved.stack.os.distro,
    )
    path = atomic_write(folder / SBOM_FILE, text)
    with catalog.transaction() as s:
        repo.record_sbom(
            s,
            build_pk,
            digest=sbom_digest(text),
            document=json.loads(text),
            inventory=inv.model_dump(mode="json"),
            held=_held(image_dir / "manifest.json"),
        )
    return path
