"""Sign a validated image's statement into a DSSE envelope and record it.

``attest_image`` runs after a validation decided ``validated`` (the cloud stage and
``make run``) and by hand (``imagectl attest``). The envelope is kept three ways: in the
catalog (``attestations``, what ``verify`` and the gate read), as a file beside the
catalog (``<state>/attestations/sha256-<hex>.dsse.json``, to publish or ship in a
bucket), and as the image's ``imagectl:attestation`` tag (its digest).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.clouds.base import CloudImage, Provider
from imagectl.errors import UserError
from imagectl.fsutil import atomic_write
from imagectl.paths import state_dir
from imagectl.provenance.keys import load_signer
from imagectl.provenance.statement import build_statement
from imagectl.tags import TAG_ATTESTATION
from imagectl.validators.attestation import PAYLOAD_TYPE


@dataclass(frozen=True)
class Attested:
    digest: str  # sha256-<hex> of the envelope
    keyid: str
    path: Path  # the envelope's file beside the catalog
    envelope: dict[str, Any]


def canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()


def envelope_digest(envelope: dict[str, Any]) -> str:
    return "sha256-" + hashlib.sha256(canonical(envelope)).hexdigest()


def sign_statement(statement: dict[str, Any], signer: Any) -> dict[str, Any]:
    from securesystemslib.dsse import Envelope

    env = Envelope(payload=canonical(statement), payload_type=PAYLOAD_TYPE, signatures={})
    env.sign(signer)
    doc: dict[str, Any] = env.to_dict()
    return doc


def attest_image(catalog: Catalog, image_pk: int, provider: Provider | None = None) -> Attested:
    """Sign and record the attestation of a ``validated`` image (bad input: exit 2)."""
    signer, public = load_signer()
    with catalog.transaction() as s:
        img = repo.get_image(s, image_pk)
        if img is None:
            raise UserError(f"catalog image {image_pk} does not exist")
        if img.state not in (ImageState.VALIDATED, ImageState.PROMOTING, ImageState.PROMOTED):
            raise UserError(
                f"image {img.label} is '{img.state}': only a validated image is attested",
                hint="Validate it first (`imagectl validate-image`)",
            )
        runs = repo.latest_receipts(s, img)
        if not runs or any(r.verdict != "pass" for r in runs):
            raise UserError(
                f"image {img.label} has no passing receipts to attest",
                hint="Validate it again; an attestation states what its receipts show",
            )
        statement = build_statement(
            cloud=img.cloud,
            region=img.region,
            cloud_image_id=img.cloud_image_id,
            stack=img.stack,
            stack_digest=img.stack_digest,
            receipts=[dict(r.receipt) for r in runs],
            verdict="pass",
            attested_by=current_actor(),
            attested_at=dt.datetime.now(dt.timezone.utc).isoformat(),
        )
        envelope = sign_statement(statement, signer)
        digest = envelope_digest(envelope)
        path = atomic_write(
            state_dir() / "attestations" / f"{digest}.dsse.json",
            json.dumps(envelope, indent=2) + "\n",
        )
        repo.record_attestation(s, img, digest=digest, keyid=public.keyid, envelope=envelope)
        repo.log_event(
            s,
            "image.attested",
            f"attestation {digest[:19]} of {img.label} signed by key {public.keyid[:12]}",
            image=img,
            details={"digest": digest, "keyid": public.keyid, "file": str(path)},
        )
        cloud_image = CloudImage(
            cloud=img.cloud, region=img.region, image_id=img.cloud_image_id, name=img.cloud_image_id
        )
    if provider is not None:
        provider.set_tags(cloud_image, {TAG_ATTESTATION: digest})
    return Attested(digest=digest, keyid=public.keyid, path=path, envelope=envelope)
