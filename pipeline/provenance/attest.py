"""Sign a validated image's statement into a DSSE envelope and record it.

``attest_image`` runs after a validation decided ``validated`` (the cloud stage and
``make run``), after a promotion made the image's copies (the statement is signed again
naming every region's copy), and by hand (``imagectl attest``). The envelope is kept
three ways: in the catalog (``attestations``, what ``verify`` and the gate read), as a
file beside the catalog (``<state>/attestations/sha256-<hex>.dsse.json``, to publish or
ship in a bucket), and as the ``imagectl:attestation`` tag (its digest) of the image and
of each copy it names.

The manifest subject is the digest of the manifest the build fetched
(``Build.manifest_sha256``), never what a host reported.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.clouds.base import CloudImage, Provider
from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write
from imagectl.paths import state_dir
from imagectl.provenance.keys import load_signer
from imagectl.provenance.sandbox import sandbox_on_real_cloud
from imagectl.provenance.statement import build_statement
from imagectl.tags import TAG_ATTESTATION, TAG_SOURCE_IMAGE
from imagectl.validators.attestation import PAYLOAD_TYPE
from imagectl.validators.attestation import envelope_digest as envelope_digest

if TYPE_CHECKING:
    from securesystemslib.signer import Signer

ATTESTABLE = (
    ImageState.VALIDATED,
    ImageState.PROMOTING,
    ImageState.PARTIALLY_PROMOTED,
    ImageState.PROMOTED,
)


@dataclass(frozen=True)
class Attested:
    digest: str  # sha256-<hex> of the envelope
    keyid: str
    path: Path  # the envelope's file beside the catalog
    envelope: dict[str, object]


def member(doc: dict[str, object], name: str) -> dict[str, object]:
    """``doc[name]`` where it is an object; ``{}`` where it is missing, empty or another
    kind of value (a statement's own checks say what is wrong with it)."""
    value = doc.get(name)
    return value if isinstance(value, dict) else {}


def canonical(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()


def sign_statement(statement: dict[str, object], signer: Signer) -> dict[str, object]:
    from securesystemslib.dsse import Envelope

    env = Envelope(payload=canonical(statement), payload_type=PAYLOAD_TYPE, signatures={})
    env.sign(signer)
    doc: dict[str, object] = env.to_dict()
    return doc


def publish(kind: str, digest: str, envelope: dict[str, object]) -> Path:
    """The envelope's file beside the catalog (``attestations/<digest>.<kind>.json``)."""
    return atomic_write(
        state_dir() / "attestations" / f"{digest}.{kind}.json",
        json.dumps(envelope, indent=2) + "\n",
    )


def attest_image(catalog: Catalog, image_pk: int, provider: Provider | None = None) -> Attested:
    """Sign and record the attestation of a validated image, naming its promoted copies
    (bad input, no signer among it: exit 2)."""
    signer, public = load_signer()
    with catalog.transaction() as s:
        img = repo.get_image(s, image_pk)
        if img is None:
            raise UserError(f"catalog image {image_pk} does not exist")
        if img.state not in ATTESTABLE:
            raise UserError(
                f"image {img.label} is '{img.state}': only a validated image is attested",
                hint="Validate it first (`imagectl validate-image "
                f"{img.cloud_image_id} --cloud {img.cloud}`)",
            )
        runs = repo.latest_receipts(s, img)
        if not runs or any(r.verdict != "pass" for r in runs):
            raise UserError(
                f"image {img.label} has no passing receipts to attest",
                hint="Validate it again; an attestation states what its receipts show",
            )
        sandboxed = sandbox_on_real_cloud(img, runs)
        if sandboxed:
            raise UserError(
                f"image {img.label} is not attested: {sandboxed[0]}"
                + (f" (and {len(sandboxed) - 1} more)" if len(sandboxed) > 1 else ""),
                hint=f"Validate it on hosts booted from the image (`imagectl validate-image "
                f"{img.cloud_image_id} --cloud {img.cloud}` without --sandbox)",
            )
        copies = [
            (row.region, row.cloud_image_id)
            for row in repo.list_images(s, stack=img.stack, cloud=img.cloud)
            if row.tags.get(TAG_SOURCE_IMAGE) == img.id and row.state in ATTESTABLE
        ]
        where = [(img.region, img.cloud_image_id), *copies]
        cloud = img.cloud
    # the full identity of each (AWS: its account; GCP: project and numeric id), from the
    # cloud, outside the transaction
    identities = {
        (region, image_id): provider.image_identity(
            CloudImage(cloud=cloud, region=region, image_id=image_id, name=image_id)
        )
        for region, image_id in where
    } if provider is not None else {}  # fmt: skip
    with catalog.transaction() as s:
        img = repo.get_image(s, image_pk)
        assert img is not None
        runs = repo.latest_receipts(s, img)
        statement = build_statement(
            cloud=img.cloud,
            region=img.region,
            cloud_image_id=img.cloud_image_id,
            stack=img.stack,
            stack_digest=img.stack_digest,
            manifest_sha256=img.build.manifest_sha256 if img.build else None,
            build_id=img.build.build_id if img.build else None,
            receipts=[dict(r.receipt) for r in runs],
            verdict="pass",
            attested_by=current_actor(),
            attested_at=dt.datetime.now(dt.timezone.utc).isoformat(),
            copies=copies,
            base_image=dict(img.build.base_image) if img.build and img.build.base_image else None,
            identities=identities,
        )
        envelope = sign_statement(statement, signer)
        digest = envelope_digest(envelope)
        path = publish("dsse", digest, envelope)
        repo.record_attestation(s, img, digest=digest, keyid=public.keyid, envelope=envelope)
        repo.log_event(
            s,
            "image.attested",
            f"attestation {digest[:19]} of {img.label} signed by key {public.keyid[:12]}"
            + (f", naming {len(copies)} cop{'y' if len(copies) == 1 else 'ies'}" if copies else ""),
            image=img,
            details={"digest": digest, "keyid": public.keyid, "file": str(path),
                     "copies": [f"{r}/{i}" for r, i in copies]},
        )  # fmt: skip
        tagged = [(img.region, img.cloud_image_id), *copies]
        cloud = img.cloud
    if provider is not None:
        for region, image_id in tagged:
            cloud_image = CloudImage(cloud=cloud, region=region, image_id=image_id, name=image_id)
            provider.set_tags(cloud_image, {TAG_ATTESTATION: digest})
    return Attested(digest=digest, keyid=public.keyid, path=path, envelope=envelope)
