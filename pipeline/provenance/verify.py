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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Attestation, Image
from imagectl.clouds.base import Provider
from imagectl.core.errors import UserError
from imagectl.core.safetext import one_line
from imagectl.provenance import revocations as published_list
from imagectl.provenance.attest import canonical, envelope_digest, member
from imagectl.tags import TAG_REVOKED
from imagectl.validators.attestation import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    BadAttestationInput,
    image_reason,
    judged_whole,
    load_seen,
    open_revocation_list,
    record_seen,
    revocations_of,
    revoked_by,
    statement_of,
    subjects,
)

if TYPE_CHECKING:
    from securesystemslib.signer import Key


class CorruptAttestation(UserError):
    """A stored attestation is not a DSSE envelope of an in-toto statement (exit 2)."""


@dataclass
class Verification:
    image: str  # the image's label (or id, offline)
    attested_image: str  # the image whose attestation was judged (a copy's source)
    digest: str | None = None
    keyid: str | None = None
    reasons: list[str] = field(default_factory=list)
    envelope: dict[str, object] | None = None  # the envelope judged (for --export-envelope)
    revoked: bool = False

    @property
    def valid(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, object]:
        return {
            "image": self.image,
            "attested_image": self.attested_image,
            "valid": self.valid,
            "revoked": self.revoked,
            "digest": self.digest,
            "keyid": self.keyid,
            "reasons": self.reasons,
        }


def _find(session: Session, img: Image, trusted: list[Key]) -> Attestation | None:
    """The newest attestation whose envelope names ``img``: its own, or (a copy) the one
    the promotion signed naming it, judged only once its signature holds (a payload is
    never read before). Tags are not followed."""
    own = repo.latest_attestation(session, img)
    if own is not None:
        return own
    for row in repo.stack_attestations(session, img.stack, img.cloud):
        try:
            statement, reasons = statement_of(dict(row.envelope), trusted, "an attestation")
        except BadAttestationInput:
            continue
        if statement is not None and not reasons and _names(statement, img) is None:
            return row
    return None


def _names(statement: dict[str, object], img: Image, where: str = "the statement") -> str | None:
    """Why ``statement`` does not name the catalog's ``img`` (None: it does). The row is
    this controller's own image (its account's, its project's), so the catalog's region
    and id are compared with the signed identity's (``validators.identity``)."""
    label = f"image:{img.cloud}/{img.region}/{img.cloud_image_id}"
    return image_reason(
        statement, img.cloud_image_id, img.cloud, where, region=img.region, whole=False,
        label=label,
    )  # fmt: skip


def verify_image(
    session: Session, img: Image, trusted: list[Key], *, provider: Provider | None = None
) -> Verification:
    """The catalog's attestation of ``img`` judged whole; revoked when the catalog, the
    published revocation list or (with ``provider``) the cloud's ``imagectl:revoked``
    tag says so (``imagectl.provenance.revocations``)."""
    row = _find(session, img, trusted)
    result = Verification(image=img.label, attested_image=img.label)
    if row is None:
        result.reasons.append(f"no attestation is recorded for {img.label}")
        result.reasons += _stores(session, img, trusted, provider, None, None, result)
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
    result.reasons += _stores(session, img, trusted, provider, statement, row.digest, result)
    if img.state == ImageState.BLOCKED.value and not result.revoked:
        result.reasons.append(
            f"{img.label} is blocked in the catalog ({one_line(img.blocked_reason or 'no reason')})"
        )
    return result


def _stores(
    session: Session,
    img: Image,
    trusted: list[Key],
    provider: Provider | None,
    statement: dict[str, object] | None,
    digest: str | None,
    result: Verification,
) -> list[str]:
    """The three stores' word on revocation: the catalog's rows, the published signed
    list (refused when rolled back, expired or gone), the cloud's tag (its digest)."""
    reasons: list[str] = []
    revoked: list[str] = []
    if statement is not None:
        found = revocations_of(
            {"revocations": [dict(r.envelope) for r in repo.revocations(session, img.stack)]},
            trusted,
            "the catalog's revocations",
        )
        revoked += revoked_by(found, statement, digest)
    listed, refused = published_list.published(trusted)
    reasons += refused
    if listed is not None and statement is not None:
        revoked += [f"{why} (the published revocation list, version {listed.version})"
                    for why in revoked_by(listed.statements, statement, digest)]  # fmt: skip
    tag, unreadable = published_list.cloud_tag(provider, img)
    reasons += unreadable
    if tag or img.tags.get(TAG_REVOKED):
        named = one_line(tag or img.tags.get(TAG_REVOKED))[:19]
        store = "cloud's" if tag else "catalog's"
        revoked.append(f"revoked (the {store} {TAG_REVOKED} tag names revocation {named})")
    result.revoked = bool(revoked)
    return reasons + [f"{img.label} is {why}" for why in dict.fromkeys(revoked)]


def verify_envelope(
    image_id: str,
    envelope: object,
    trusted: list[Key],
    *,
    cloud: str | None = None,
    stack: str | None = None,
    revocations: object = None,
    where: str = "the envelope",
) -> Verification:
    """Offline: does ``envelope`` (signed by ``trusted``) attest ``image_id`` (its full
    identity: ``validators.identity``), on ``cloud`` and of ``stack`` where given, whole
    and not revoked by the signed list ``revocations`` (refused when older than one this
    state folder saw, or expired)? No catalog."""
    result = Verification(image=image_id, attested_image=image_id)
    if not isinstance(envelope, dict):
        raise UserError(f"{where} is not a DSSE envelope")
    result.digest, result.envelope = envelope_digest(envelope), dict(envelope)
    result.keyid = signing_keyid(envelope, trusted)
    statement = _open(envelope, where, trusted, result)
    if statement is None:
        return result
    why = image_reason(statement, image_id, cloud, where)
    if why:
        result.reasons.append(why)
    else:
        image = member(member(statement, "predicate"), "image")
        result.attested_image = one_line(image.get("id") or image_id)
    if stack and f"stack:{stack}" not in subjects(statement):
        signed = [n.removeprefix("stack:") for n in subjects(statement) if n.startswith("stack:")]
        result.reasons.append(
            f"{where} attests stack {one_line(', '.join(signed) or 'none')}, not {stack}"
        )
    result.reasons += judged_whole(statement, where)
    if revocations is not None:
        try:
            seen = load_seen(published_list.seen_file())
            found, refused = open_revocation_list(
                revocations, trusted, "the revocation list", seen=seen
            )
        except BadAttestationInput as exc:
            raise UserError(str(exc)) from None
        result.reasons += refused
        if found is not None:
            record_seen(published_list.seen_file(), found, seen, trusted)
            revoked = revoked_by(found.statements, statement, result.digest)
            result.revoked = bool(revoked)
            result.reasons += [f"{image_id} is {why}" for why in revoked]
    return result


def signing_keyid(envelope: dict[str, object], trusted: list[Key]) -> str | None:
    """The key id an envelope's signature names: a trusted key's first (the one that
    signed, once the signature holds), else the first named (an untrusted signer)."""
    signatures = envelope.get("signatures")
    named = [
        str(sig.get("keyid"))
        for sig in (signatures if isinstance(signatures, list) else [])
        if isinstance(sig, dict) and sig.get("keyid")
    ]
    known = {getattr(k, "keyid", None) for k in trusted}
    return next((k for k in named if k in known), named[0] if named else None)


def _open(
    envelope: dict[str, object], where: str, trusted: list[Key], result: Verification
) -> dict[str, object] | None:
    """The statement inside ``envelope`` (the node's reader, ``validators.attestation``);
    a bad signature or type is a reason, a non-envelope is corrupt input."""
    try:
        statement, reasons = statement_of(envelope, trusted, where)
    except BadAttestationInput as exc:
        raise CorruptAttestation(
            str(exc), hint="Sign the image again (`imagectl attest`)"
        ) from None
    result.reasons += reasons
    return statement if isinstance(statement, dict) else None  # a dict or None


def _statement_reasons(
    session: Session, img: Image, source: Image, statement: dict[str, object], where: str
) -> list[str]:
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        return []  # statement_of gave the reason
    reasons = []
    why = _names(statement, img, where)
    if why:
        reasons.append(why)
    if subjects(statement).get(f"stack:{img.stack}") != img.stack_digest:
        reasons.append(
            f"{where} does not attest stack {img.stack} at digest {img.stack_digest[:12]}"
        )
    reasons += judged_whole(statement, where)
    receipts = member(statement, "predicate").get("receipts")
    signed = {canonical(r) for r in (receipts if isinstance(receipts, list) else [])}
    for run in repo.latest_receipts(session, source):
        if canonical(dict(run.receipt)) not in signed:
            reasons.append(
                f"{where}: the catalog's receipt {run.id} ({run.shape} on {run.host}) is not "
                "the one signed (changed after signing, or newer than the attestation)"
            )
    return reasons
