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
from dataclasses import dataclass
from pathlib import Path

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.models import Build
from imagectl.clouds.base_image import BaseImage
from imagectl.core.boundedjson import parse_bounded
from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write
from imagectl.provenance.inventory import (
    IMAGE_FOLDER,
    INVENTORY_FILE,
    MAX_PACKAGES,
    Inventory,
    load_inventory,
)
from imagectl.provenance.sbom import render_sbom, sbom_digest
from imagectl.stacks.resolve import ResolvedStack

SBOM_FILE = "sbom.cdx.json"
# The image manifest (write-manifest.py): pins, held packages, a few facts; tens of KB.
MANIFEST_MAX_BYTES = 8 * 1024 * 1024
MANIFEST_MAX_DEPTH = 16
MANIFEST_HINT = "Build the image again; the manifest role writes it"


def _held(manifest_file: Path) -> list[str]:
    where = str(manifest_file)
    try:
        with manifest_file.open("rb") as fh:
            data = fh.read(MANIFEST_MAX_BYTES + 1)
    except OSError:
        return []  # no manifest fetched: nothing known to be held
    doc = parse_bounded(
        data, kind="image manifest", where=where, hint=MANIFEST_HINT,
        max_bytes=MANIFEST_MAX_BYTES, max_depth=MANIFEST_MAX_DEPTH,
    )  # fmt: skip
    held = doc.get("held") if isinstance(doc, dict) else None
    if not isinstance(held, list):
        return []
    if len(held) > MAX_PACKAGES or not all(isinstance(h, str) and len(h) <= 1024 for h in held):
        raise UserError(
            f"the image manifest's held packages are not a list of at most {MAX_PACKAGES} "
            "package names",
            where=where,
            hint=MANIFEST_HINT,
        )
    return sorted(held)


def build_base_image(catalog: Catalog, build_pk: int) -> BaseImage | None:
    """The base image recorded on a build (None for builds before migration 0006)."""
    with catalog.transaction() as s:
        build = s.get(Build, build_pk)
        doc = build.base_image if build is not None else None
        return BaseImage.from_dict(dict(doc)) if doc else None


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


@dataclass(frozen=True)
class BuildSbom:
    """A build's SBOM, read from what the image reported and rendered: everything that can
    refuse a hostile report (exit 2) happens before the build's images are recorded."""

    folder: Path
    text: str
    inventory: Inventory
    held: list[str]


def prepare_build_sbom(
    build_id: str,
    folder: Path,
    resolved: ResolvedStack,
    cloud: str,
    base_image: BaseImage | None = None,
) -> BuildSbom | None:
    """The SBOM of the build in ``folder`` (its base image as the image's ancestor); None
    without an inventory (no provisioning)."""
    image_dir = folder / IMAGE_FOLDER
    inventory_file = image_dir / INVENTORY_FILE
    if not inventory_file.is_file():
        return None
    inv = load_inventory(inventory_file)
    held = _held(image_dir / "manifest.json")
    text = render_sbom(
        inv,
        stack=resolved.name,
        stack_digest=resolved.digest,
        cloud=cloud,
        build_id=build_id,
        distro=resolved.stack.os.distro,
        release=resolved.stack.os.release,
        base_image=base_image,
    )
    return BuildSbom(folder=folder, text=text, inventory=inv, held=held)


def store_build_sbom(catalog: Catalog, build_pk: int, sbom: BuildSbom) -> Path:
    """``<build folder>/sbom.cdx.json``, and the SBOM with its inventory in the catalog."""
    path = atomic_write(sbom.folder / SBOM_FILE, sbom.text)
    with catalog.transaction() as s:
        repo.record_sbom(
            s,
            build_pk,
            digest=sbom_digest(sbom.text),
            document=json.loads(sbom.text),
            inventory=sbom.inventory.model_dump(mode="json"),
            held=sbom.held,
        )
    return path


def record_build_sbom(
    catalog: Catalog,
    build_pk: int,
    build_id: str,
    folder: Path,
    resolved: ResolvedStack,
    cloud: str,
) -> Path | None:
    """``prepare_build_sbom`` then ``store_build_sbom``."""
    base = build_base_image(catalog, build_pk)
    sbom = prepare_build_sbom(build_id, folder, resolved, cloud, base)
    return None if sbom is None else store_build_sbom(catalog, build_pk, sbom)
