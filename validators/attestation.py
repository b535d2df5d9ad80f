"""The node's own check of its image's signed attestation (the consumer side), and the
judgement of signed data that ``imagectl verify`` shares with it.

A deploy system places the image's DSSE envelope on the node (``imagectl verify
--export-envelope`` or the copy beside the catalog, through user data or config
management), and the revocations it knows (``--export-revocations``); the image carries
the trusted public keys (``attestation-trust.json``, the repository's pinned anchor,
written at build time). With ``validator_require_attestation`` the boot unit runs
``imagectl verify-node`` first and the node is not marked ready unless: the envelope is
signed by a trusted key, it is an imagectl validation statement judged whole (verdict
pass and every receipt it carries passed), one of its image subjects is the image this
instance booted from (the cloud's instance metadata), its manifest subject is the sha256
of this node's ``/etc/imagectl/manifest.json`` (which carries the build id and a
per-build nonce, so no two builds share it), and no trusted revocation names it.

The statement's names live here, in the validator, so the controller that writes the
statement (``imagectl.provenance.statement``) and the node that reads it share them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://imagectl.dev/attestation/validation/v1"
REVOCATION_TYPE = "https://imagectl.dev/attestation/revocation/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MANIFEST_SUBJECT = "manifest:/etc/imagectl/manifest.json"
ENVELOPE_SUBJECT = "attestation:"  # a revocation's subject: attestation:sha256-<hex>
MAX_FILE_BYTES = 64 * 1024 * 1024  # an envelope carries receipts; nothing sane is larger


class BadAttestationInput(Exception):
    """A file is missing or not what it should be (the message names it)."""


def _read_json(path: Path, what: str) -> Any:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise BadAttestationInput(
                f"the {what} {path} is larger than {MAX_FILE_BYTES >> 20} MiB"
            )
        text = path.read_text()
    except OSError as exc:
        raise BadAttestationInput(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if not text.strip():
        raise BadAttestationInput(f"the {what} {path} is empty")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadAttestationInput(f"the {what} {path} is not JSON: {exc}") from None


def parse_trust(trust_file: Path) -> list[Any]:
    """The keys of a trust file; missing, empty, foreign or keyless is bad input."""
    from securesystemslib.signer import SSlibKey

    doc = _read_json(trust_file, "trust file")
    entries = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise BadAttestationInput(
            f'the trust file {trust_file} is not a trust document ({{"keys": [...]}})'
        )
    if not entries:
        raise BadAttestationInput(f"the trust file {trust_file} lists no key: it trusts nobody")
    try:
        return [
            SSlibKey.from_dict(k["keyid"], {f: v for f, v in k.items() if f != "keyid"})
            for k in entries
        ]
    except Exception as exc:  # KeyError, TypeError, ValueError, securesystemslib's own
        raise BadAttestationInput(
            f"the trust file {trust_file} holds a key that is not a public key: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def trusted_keys(trust_file: Path) -> list[Any]:
    return parse_trust(trust_file)


def statement_of(envelope: dict[str, Any], keys: list[Any], where: str) -> tuple[Any, list[str]]:
    """(the statement, reasons) of a DSSE envelope: a bad signature is a reason."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    try:
        env = Envelope.from_dict(json.loads(json.dumps(envelope)))  # from_dict edits its input
    except Exception as exc:  # KeyError, TypeError, binascii.Error: not an envelope
        raise BadAttestationInput(
            f"{where} is not a DSSE envelope ({type(exc).__name__})"
        ) from None
    if env.payload_type != PAYLOAD_TYPE:
        return None, [f"{where} carries '{env.payload_type}', not an in-toto statement"]
    reasons = []
    try:
        env.verify(keys, 1)
    except VerificationError:
        reasons.append(f"{where} is not signed by a trusted key")
    try:
        statement = json.loads(env.payload)
    except ValueError:
        raise BadAttestationInput(f"{where}: the payload is not JSON") from None
    if not isinstance(statement, dict):
        raise BadAttestationInput(f"{where}: the payload is not a statement object")
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        reasons.append(f"{where} is not an imagectl validation statement")
    return statement, reasons


def subjects(statement: dict[str, Any]) -> dict[str, Any]:
    return {
        str(s.get("name")): (s.get("digest") or {}).get("sha256")
        for s in statement.get("subject") or []
        if isinstance(s, dict)
    }


def name_digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def image_subjects(statement: dict[str, Any]) -> list[str]:
    """The statement's ``image:<cloud>/<region>/<id>`` subjects whose digest is their
    name's (the form the controller signs)."""
    return [
        name
        for name, digest in subjects(statement).items()
        if name.startswith("image:") and digest == name_digest(name)
    ]


def names_image(statement: dict[str, Any], image_id: str, cloud: str | None = None) -> bool:
    """Does a signed image subject name ``image_id`` (on ``cloud`` when given)? A cloud's
    metadata may give a longer form than the catalog's id (Compute's
    ``projects/P/global/images/NAME``, an ARM resource id): the last path part counts."""
    want = image_id.strip().rstrip("/")
    for name in image_subjects(statement):
        where, _, signed = name.removeprefix("image:").partition("/")
        signed = signed.partition("/")[2]
        if cloud and where != cloud:
            continue
        if signed == want or want.rsplit("/", 1)[-1] == signed.rsplit("/", 1)[-1] != "":
            return True
    return False


def judged_whole(statement: dict[str, Any], where: str) -> list[str]:
    """The statement's own consistency: its verdict is pass, it carries receipts, and
    every receipt it carries passed for the image and stack digest it names. A statement
    that says pass while one of its receipts failed is no attestation."""
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        return [f"{where} has no predicate"]
    reasons = []
    if predicate.get("verdict") != "pass":
        reasons.append(f"{where} says the verdict is {predicate.get('verdict')!r}, not pass")
    receipts = predicate.get("receipts")
    if not isinstance(receipts, list) or not receipts:
        return [*reasons, f"{where} carries no receipt for its verdict"]
    found = predicate.get("image")
    image: dict[str, Any] = found if isinstance(found, dict) else {}
    for i, receipt in enumerate(receipts):
        if not isinstance(receipt, dict):
            reasons.append(f"{where}: receipt {i} is not a receipt")
            continue
        about = receipt.get("host")
        host = about.get("hostname") if isinstance(about, dict) else None
        name = f"{where}: receipt {i}" + (f" ({host})" if host else "")
        if receipt.get("verdict") != "pass":
            reasons.append(f"{name} says {receipt.get('verdict')!r}, yet the statement says pass")
        if receipt.get("worst_action") == "BLOCK_IMAGE":
            reasons.append(f"{name} asks to BLOCK_IMAGE")
        for field, want in (
            ("image_id", image.get("id")),
            ("stack_digest", image.get("stack_digest")),
        ):
            if want and receipt.get(field) not in (None, want):
                reasons.append(f"{name} names {field} {str(receipt.get(field))[:40]}, not {want}")
    return reasons


def revocations_of(doc: Any, keys: list[Any], where: str) -> list[dict[str, Any]]:
    """The trusted revocation statements in a revocations document (``{"revocations":
    [envelope, ...]}``); an envelope not signed by a trusted key is ignored (anyone may
    write one), a document that is not one is bad input."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    entries = doc.get("revocations") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise BadAttestationInput(f"{where} is not a revocations document")
    out = []
    for entry in entries:
        try:
            env = Envelope.from_dict(json.loads(json.dumps(entry)))
            env.verify(keys, 1)
            statement = json.loads(env.payload)
        except (VerificationError, ValueError):
            continue
        except Exception:
            raise BadAttestationInput(
                f"{where} holds an entry that is not a DSSE envelope"
            ) from None
        if isinstance(statement, dict) and statement.get("predicateType") == REVOCATION_TYPE:
            out.append(statement)
    return out


def revoked_by(
    revocations: list[dict[str, Any]], statement: dict[str, Any], digest: str | None
) -> list[str]:
    """Reasons a trusted revocation names this attestation (its envelope digest) or one
    of its image subjects."""
    mine = set(image_subjects(statement))
    reasons = []
    for revocation in revocations:
        named = set(subjects(revocation))
        if (digest and f"{ENVELOPE_SUBJECT}{digest}" in named) or mine & named:
            predicate = revocation.get("predicate") or {}
            reasons.append(
                f"revoked by {predicate.get('revoked_by', 'an operator')} at "
                f"{predicate.get('revoked_at', '?')}: {predicate.get('reason', 'no reason')}"
            )
    return reasons


def envelope_digest(envelope: dict[str, Any]) -> str:
    body = json.dumps(envelope, sort_keys=True, separators=(",", ":"), default=str).encode()
    return "sha256-" + hashlib.sha256(body).hexdigest()


def verify_node(
    envelope_file: Path,
    trust_file: Path,
    manifest_file: Path,
    *,
    image_id: str | None,
    cloud: str | None = None,
    revocations_file: Path | None = None,
) -> list[str]:
    """Reasons this node's image is not attested (empty: it is). ``image_id``: what the
    instance metadata says this node booted from (None: it could not tell, a reason)."""
    keys = trusted_keys(trust_file)
    envelope = _read_json(envelope_file, "attestation")
    if not isinstance(envelope, dict):
        raise BadAttestationInput(f"the attestation {envelope_file} is not a DSSE envelope")
    statement, reasons = statement_of(envelope, keys, f"the attestation {envelope_file}")
    if statement is None:
        return reasons
    try:
        manifest = hashlib.sha256(manifest_file.read_bytes()).hexdigest()
    except OSError as exc:
        raise BadAttestationInput(
            f"cannot read the image manifest {manifest_file}: {exc.strerror or exc}"
        ) from None
    attested = subjects(statement).get(MANIFEST_SUBJECT)
    if attested != manifest:
        reasons.append(
            f"the attestation is for manifest {str(attested)[:12]}, but this image's "
            f"{manifest_file} is {manifest[:12]}: it attests another image"
        )
    if not image_id:
        reasons.append(
            "the instance metadata does not say which image this node booted from, so the "
            "attestation cannot be matched to it"
        )
    elif not names_image(statement, image_id, cloud):
        signed = ", ".join(image_subjects(statement)) or "no image"
        reasons.append(f"the attestation names {signed}, not this node's image {image_id}")
    reasons += judged_whole(statement, "the attestation")
    if revocations_file is not None and revocations_file.exists():
        doc = _read_json(revocations_file, "revocations file")
        found = revocations_of(doc, keys, f"the revocations file {revocations_file}")
        reasons += revoked_by(found, statement, envelope_digest(envelope))
    return reasons
