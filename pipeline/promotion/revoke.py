"""Revoke an image's attestation: a signed statement that it must not be used.

``revoke_image`` (``imagectl revoke IMAGE --reason``, and ``imagectl block`` of an
attested or promoted image) rolls a promoted image back first (the rollback stage:
every region's pointer back to the image before it), blocks it, then signs an in-toto
statement of predicate type ``.../revocation/v1`` whose subjects are the attestation
(``attestation:sha256-<hex>``) and every image it named, and publishes it next to the
attestation: the catalog (``revocations``), a file beside the catalog
(``attestations/<digest>.revoked.json``), and the ``imagectl:revoked`` tag on the image
and its copies. Deploy jobs read ``imagectl verify --export-revocations`` (a
``{"revocations": [...]}`` document, placed on nodes beside the envelope);
``verify`` and ``verify-node`` refuse an image a trusted revocation names.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import TRANSITIONS, ImageState
from imagectl.catalog.models import Image
from imagectl.clouds.base import CloudImage, Provider
from imagectl.core.boundedjson import parse_bounded
from imagectl.core.errors import UserError
from imagectl.promotion.rollback import rollback
from imagectl.provenance.attest import publish, sign_statement
from imagectl.provenance.keys import load_signer, load_trust
from imagectl.provenance.revocations import publish_list
from imagectl.tags import TAG_REVOKED, TAG_SOURCE_IMAGE
from imagectl.validators.attestation import (
    ENVELOPE_SUBJECT,
    REVOCATION_TYPE,
    STATEMENT_TYPE,
    envelope_digest,
    image_subjects,
    name_digest,
)

if TYPE_CHECKING:
    # the class's own module: securesystemslib.signer imports it without re-exporting
    from securesystemslib.signer._key import Key


@dataclass(frozen=True)
class Revoked:
    image: str  # label
    digest: str
    attestation: str | None
    reason: str
    rolled_back: list[str]


def _payload(envelope: dict[str, object]) -> dict[str, object]:
    """The payload of the catalog's own attestation (bounded: it is JSON from a store)."""
    payload = envelope.get("payload")
    if not isinstance(payload, (str, bytes)):
        return {}
    try:
        doc = parse_bounded(
            base64.b64decode(payload), kind="attestation payload",
            where="the catalog's attestation", hint="", max_bytes=64 << 20, max_depth=48,
        )  # fmt: skip
    except Exception:
        return {}
    return doc if isinstance(doc, dict) else {}


def revocation_statement(
    *, attestation: str | None, images: list[str], reason: str, actor: str, at: str
) -> dict[str, object]:
    """The in-toto statement of a revocation (signed into its DSSE envelope)."""
    names = ([f"{ENVELOPE_SUBJECT}{attestation}"] if attestation else []) + images
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": n, "digest": {"sha256": name_digest(n)}} for n in names],
        "predicateType": REVOCATION_TYPE,
        "predicate": {"reason": reason, "revoked_by": actor, "revoked_at": at},
    }


def revoke_image(
    catalog: Catalog,
    provider: Provider | None,
    image_pk: int,
    *,
    reason: str,
    actor: str | None = None,
) -> Revoked:
    """Sign and publish the revocation of ``image_pk`` (its source when it is a copy);
    the image is blocked, after a rollback when a pointer names it."""
    if not reason.strip():
        raise UserError("revoking an image needs --reason '...'")
    actor = actor or current_actor()
    signer, public = load_signer()  # before any change: no signer, nothing happens
    with catalog.transaction() as s:
        img = repo.image_row(s, image_pk)
        source_pk = img.tags.get(TAG_SOURCE_IMAGE, img.id)
        source = repo.image_row(s, int(source_pk))
        pk, stack, cloud, state = source.id, source.stack, source.cloud, source.state
    rolled_back: list[str] = []
    if provider is not None and state in (ImageState.PROMOTED, ImageState.PARTIALLY_PROMOTED):
        rolled_back = _roll_back(catalog, provider, pk, stack, reason, actor)
    with catalog.transaction() as s:
        source = repo.image_row(s, pk)
        row = repo.latest_attestation(s, source)
        images = image_subjects(_payload(row.envelope)) if row is not None else []
        if not images:
            images = [f"image:{source.cloud}/{source.region}/{source.cloud_image_id}"]
        statement = revocation_statement(
            attestation=row.digest if row is not None else None,
            images=images,
            reason=reason,
            actor=actor,
            at=dt.datetime.now(dt.timezone.utc).isoformat(),
        )
        envelope = sign_statement(statement, signer)
        digest = envelope_digest(envelope)
        path = publish("revoked", digest, envelope)
        repo.record_revocation(
            s, source, digest=digest, attestation=row.digest if row is not None else None,
            reason=reason, keyid=public.keyid, envelope=envelope,
        )  # fmt: skip
        group = [r for r in repo.list_images(s, stack=stack, cloud=cloud)
                 if r.id == pk or r.tags.get(TAG_SOURCE_IMAGE) == pk]  # fmt: skip
        for member in group:
            if member.state != ImageState.BLOCKED.value:
                _block(s, member, reason, actor)
            member.tags = {**member.tags, TAG_REVOKED: digest}
        repo.log_event(
            s,
            "image.revoked",
            f"{source.label} revoked by {actor}: {reason} (revocation {digest[:19]})",
            image=source,
            actor=actor,
            details={"digest": digest, "reason": reason, "file": str(path),
                     "attestation": row.digest if row is not None else None,
                     "rolled_back": rolled_back},
        )  # fmt: skip
        tagged = [(m.region, m.cloud_image_id) for m in group]
        label = source.label
        attested = row.digest if row is not None else None
        publish_list(s, signer, _trust())  # the signed list, a higher version
    if provider is not None:
        for region, image_id in tagged:
            cloud_image = CloudImage(cloud=cloud, region=region, image_id=image_id, name=image_id)
            provider.set_tags(cloud_image, {TAG_REVOKED: digest})
    return Revoked(label, digest, attested, reason, rolled_back)


def _trust() -> list[Key] | None:
    try:
        return load_trust()
    except UserError:
        return None  # no trust configured here: the list is published, not checked


def _block(s: Session, img: Image, reason: str, actor: str) -> None:
    """Blocked (a promoted copy that no pointer named goes through rolled_back)."""
    if img.state in (ImageState.PROMOTED, ImageState.PARTIALLY_PROMOTED):
        repo.set_state(s, img, ImageState.ROLLED_BACK, reason=f"revoked: {reason}", actor=actor)
    if ImageState.BLOCKED in TRANSITIONS[ImageState(img.state)]:
        repo.set_state(
            s, img, ImageState.BLOCKED, reason=f"revoked: {reason}",
            blocked_reason=f"revoked: {reason}", actor=actor,
        )  # fmt: skip


def _roll_back(
    catalog: Catalog, provider: Provider, pk: int, stack: str, reason: str, actor: str
) -> list[str]:
    """The rollback stage, when a pointer names the image: every pointer back to the
    image before it (``imagectl rollback``'s own code), the group ``rolled_back``."""
    with catalog.transaction() as s:
        named = {p.image_id for p in repo.list_pointers(s, stack=stack, cloud=provider.cloud)}
        group = {r.id for r in repo.list_images(s, stack=stack, cloud=provider.cloud)
                 if r.id == pk or r.tags.get(TAG_SOURCE_IMAGE) == pk}  # fmt: skip
    if not named & group:
        return []
    result = rollback(catalog, provider, stack, reason=f"revoked: {reason}", actor=actor)
    return result.rolled_back
