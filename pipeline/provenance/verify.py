"""Check an image's attestation from signed data only: who signed it, what it names,
what it says, and whether a trusted revocation names it.

``verify_image`` (the catalog's envelope) and ``verify_envelope`` (an envelope and a
trust file alone, offline, as a deploy job has them) return the reasons the
attestation does not hold (empty: it holds). Each is a reason: no envelope that names
the image, a signature by no trusted key (a tampered payload fails here too: DSSE signs
the exact bytes), a statement whose image subjects do not name this image (a promoted
copy is named by the statement the promotion signed again; a catalog tag pointing at
another image counts for nothing), another stack digest, a statement that does not hold
together (its verdict is not pass, or one of its receipts failed), a catalog receipt
that differs from the one signed, a trusted revocation naming it, or (catalog only) the
image blocked in the catalog. A stored envelope that is not a DSSE envelope of an
in-toto statement is corrupt (``CorruptAttestation``, exit 2).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Attestation, Image
from imagectl.errors import UserError
from imagectl.provenance.attest import canonical, envelope_digest
from imagectl.provenance.statement import image_subject_name
from imagectl.validators.attestation import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    BadAttestationInput,
    image_subjects,
    judged_whole,
    names_image,
    revocations_of,
    revoked_by,
    statement_of,
    subjects,
)


class CorruptAttestation(UserError):
    """A stored attestation is not a DSSE envelope of an in-toto statement (exit 2)."""


@dataclass
class Verification:
    image: str  # the image's label (or id, offline)
    attested_image: str  # the image whose attestation was judged (a copy's source)
    digest: str | None = None
    keyid: str | None = None
    reasons: list[str] = field(default_factory=list)
    envelope: dict[str, Any] | None = None  # the envelope judged (for --export-envelope)
    revoked: bool = False

    @property
    def valid(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "attested_image": self.attested_image,
            "valid": self.valid,
            "revoked": self.revoked,
            "digest": self.digest,
            "keyid": self.keyid,
            "reasons": self.reasons,
        }


def _unverified_statement(envelope: dict[str, Any]) -> dict[str, Any]:
    """The payload, only to find which envelope to judge (judged after, signature first)."""
    try:
        doc = json.loads(base64.b64decode(envelope["payload"]))
    except Exception:
        return {}
    return doc if isinstance(doc, dict) else {}


def _find(session: Session, img: Image) -> Attestation | None:
    """The newest attestation whose envelope names ``img``: its own, or (a copy) the one
    the promotion signed naming it. Tags are not followed."""
    name = image_subject_name(img.cloud, img.region, img.cloud_image_id)
    own = repo.latest_attestation(session, img)
    if own is not None:
        return own
    for row in repo.stack_attestations(session, img.stack, img.cloud):
        if name in image_subjects(_unverified_statement(row.envelope)):
            return row
    return None


def verify_image(session: Session, img: Image, trusted: list[Any]) -> Verification:
    row = _find(session, img)
    result = Verification(image=img.label, attested_image=img.label)
    if row is None:
        result.reasons.append(f"no attestation is recorded for {img.label}")
        return result
    source = row.image
    result.attested_image = source.label
    where = f"attestation {row.digest[:19]} of {source.label}"
    result.digest, result.keyid = row.digest, row.keyid
    result.envelope = dict(row.envelope)
    statement = _open(row.envelope, where, trusted, result)
    if envelope_digest(row.envelope) != row.digest:
        result.reasons.append(f"{where}: the stored envelope does not match its digest")
    if statement is not None:
        result.reasons += _statement_reasons(session, img, source, statement, where)
        found = revocations_of(
            {"revocations": [dict(r.envelope) for r in repo.revocations(session, img.stack)]},
            trusted,
            "the catalog's revocations",
        )
        revoked = revoked_by(found, statement, row.digest)
        result.revoked = bool(revoked)
        result.reasons += [f"{img.label} is {why}" for why in revoked]
    if img.state == ImageState.BLOCKED.value and not result.revoked:
        result.reasons.append(
            f"{img.label} is blocked in the catalog ({img.blocked_reason or 'no reason'})"
        )
    return result


def verify_envelope(
    image_id: str,
    envelope: Any,
    trusted: list[Any],
    *,
    cloud: str | None = None,
    revocations: Any = None,
    where: str = "the envelope",
) -> Verification:
    """Offline: does ``envelope`` (signed by ``trusted``) attest ``image_id``, whole and
    not revoked by a trusted revocation in ``revocations``? No catalog."""
    result = Verification(image=image_id, attested_image=image_id)
    if not isinstance(envelope, dict):
        raise UserError(f"{where} is not a DSSE envelope")
    result.digest, result.envelope = envelope_digest(envelope), dict(envelope)
    statement = _open(envelope, where, trusted, result)
    if statement is None:
        return result
    if not names_image(statement, image_id, cloud):
        signed = ", ".join(image_subjects(statement)) or "no image"
        result.reasons.append(f"{where} attests {signed}, not {image_id}")
    else:
        predicate = statement.get("predicate") or {}
        image = predicate.get("image") or {}
        result.attested_image = str(image.get("id") or image_id)
    result.reasons += judged_whole(statement, where)
    if revocations is not None:
        try:
            found = revocations_of(revocations, trusted, "the revocations file")
        except BadAttestationInput as exc:
            raise UserError(str(exc)) from None
        revoked = revoked_by(found, statement, result.digest)
        result.revoked = bool(revoked)
        result.reasons += [f"{image_id} is {why}" for why in revoked]
    return result


def _open(
    envelope: dict[str, Any], where: str, trusted: list[Any], result: Verification
) -> dict[str, Any] | None:
    """The statement inside ``envelope`` (the node's reader, ``validators.attestation``);
    a bad signature or type is a reason, a non-envelope is corrupt input."""
    try:
        statement, reasons = statement_of(envelope, trusted, where)
    except BadAttestationInput as exc:
        raise CorruptAttestation(
            str(exc), hint="Sign the image again (`imagectl attest`)"
        ) from None
    result.reasons += reasons
    return statement  # type: ignore[no-any-return]


def _statement_reasons(
    session: Session, img: Image, source: Image, statement: dict[str, Any], where: str
) -> list[str]:
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        return []  # statement_of gave the reason
    reasons = []
    name = image_subject_name(img.cloud, img.region, img.cloud_image_id)
    if name not in image_subjects(statement):
        images = ", ".join(image_subjects(statement)) or "no image"
        reasons.append(f"{where} attests {images}, not {name}")
    if subjects(statement).get(f"stack:{img.stack}") != img.stack_digest:
        reasons.append(
            f"{where} does not attest stack {img.stack} at digest {img.stack_digest[:12]}"
        )
    reasons += judged_whole(statement, where)
    predicate = statement.get("predicate") or {}
    signed = {canonical(r) for r in predicate.get("receipts") or []}
    for run in repo.latest_receipts(session, source):
        if canonical(dict(run.receipt)) not in signed:
            reasons.append(
                f"{where}: the catalog's receipt {run.id} ({run.shape} on {run.host}) is not "
                "the one signed (changed after signing, or newer than the attestation)"
            )
    return reasons


def export_revocations(session: Session, stack: str | None = None) -> dict[str, Any]:
    """The recorded revocations as one document for deploy jobs and nodes."""
    return {"revocations": [dict(r.envelope) for r in repo.revocations(session, stack)]}
