"""Check an image's attestation: who signed it, what it names, what it says.

``verify_image`` returns the reasons the image's newest attestation does not hold
(empty: it holds). An image without one, a signature by no trusted key (a tampered
payload fails here too: DSSE signs the exact bytes), a statement for another image or
stack digest, a verdict other than pass, or a catalog receipt that differs from the one
signed: each is a reason. A promoted copy (replica) is judged by its source image's
attestation. A stored envelope that is not a DSSE envelope of an in-toto statement is
corrupt (``CorruptAttestation``, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.models import Image
from imagectl.errors import UserError
from imagectl.provenance.attest import canonical, envelope_digest
from imagectl.provenance.statement import image_subject_name, name_digest
from imagectl.tags import TAG_SOURCE_IMAGE
from imagectl.validators.attestation import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    BadAttestationInput,
    statement_of,
    subjects,
)


class CorruptAttestation(UserError):
    """A stored attestation is not a DSSE envelope of an in-toto statement (exit 2)."""


@dataclass
class Verification:
    image: str  # the image's label
    attested_image: str  # the image whose attestation was judged (a replica's source)
    digest: str | None = None
    keyid: str | None = None
    reasons: list[str] = field(default_factory=list)
    envelope: dict[str, Any] | None = None  # the envelope judged (for --export-envelope)

    @property
    def valid(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "attested_image": self.attested_image,
            "valid": self.valid,
            "digest": self.digest,
            "keyid": self.keyid,
            "reasons": self.reasons,
        }


def _source(session: Session, img: Image) -> Image:
    source_id = (img.tags or {}).get(TAG_SOURCE_IMAGE)
    if source_id is None:
        return img
    source = repo.get_image(session, int(source_id))
    if source is None:
        raise UserError(f"image {img.label} is a copy of catalog image {source_id}, which is gone")
    return source


def verify_image(session: Session, img: Image, trusted: list[Any]) -> Verification:
    source = _source(session, img)
    result = Verification(image=img.label, attested_image=source.label)
    row = repo.latest_attestation(session, source)
    if row is None:
        result.reasons.append(f"no attestation is recorded for {source.label}")
        return result
    where = f"attestation {row.digest[:19]} of {source.label}"
    result.digest, result.keyid = row.digest, row.keyid
    result.envelope = dict(row.envelope)
    statement = _open(row.envelope, where, trusted, result)
    if envelope_digest(row.envelope) != row.digest:
        result.reasons.append(f"{where}: the stored envelope does not match its digest")
    if statement is not None:
        result.reasons += _statement_reasons(session, source, statement, where)
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
    session: Session, img: Image, statement: dict[str, Any], where: str
) -> list[str]:
    reasons = []
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        return []  # statement_of gave the reason
    named = subjects(statement)
    name = image_subject_name(img.cloud, img.region, img.cloud_image_id)
    if named.get(name) != name_digest(name):
        images = ", ".join(n for n in named if n.startswith("image:")) or "no image"
        reasons.append(f"{where} attests {images}, not {name}")
    if named.get(f"stack:{img.stack}") != img.stack_digest:
        reasons.append(
            f"{where} does not attest stack {img.stack} at digest {img.stack_digest[:12]}"
        )
    predicate = statement.get("predicate") or {}
    if predicate.get("verdict") != "pass":
        reasons.append(f"{where} says the verdict is {predicate.get('verdict')!r}, not pass")
    signed = {canonical(r) for r in predicate.get("receipts") or []}
    for run in repo.latest_receipts(session, img):
        if canonical(dict(run.receipt)) not in signed:
            reasons.append(
                f"{where}: the catalog's receipt {run.id} ({run.shape} on {run.host}) is not "
                "the one signed (changed after signing, or newer than the attestation)"
            )
    return reasons
