"""The node's own check of its image's signed attestation (the consumer side).

A deploy system places the image's DSSE envelope on the node (``imagectl verify
--export-envelope`` or the copy beside the catalog, through user data or config
management); the image carries the trusted public keys (``attestation-trust.json``,
written at build time). With ``validator_require_attestation`` the boot unit runs
``imagectl verify-node`` first and the node is not marked ready unless: the envelope is
signed by a trusted key, it is an imagectl validation statement, its manifest subject is
the sha256 of this node's ``/etc/imagectl/manifest.json`` (the image that booted is the
image that was validated), and its verdict is pass.

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
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MANIFEST_SUBJECT = "manifest:/etc/imagectl/manifest.json"


class BadAttestationInput(Exception):
    """A file is missing or not what it should be (the message names it)."""


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise BadAttestationInput(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BadAttestationInput(f"the {what} {path} is not JSON: {exc}") from None


def trusted_keys(trust_file: Path) -> list[Any]:
    from securesystemslib.signer import SSlibKey

    doc = _read_json(trust_file, "trust file")
    try:
        return [
            SSlibKey.from_dict(k["keyid"], {f: v for f, v in k.items() if f != "keyid"})
            for k in doc["keys"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise BadAttestationInput(
            f"the trust file {trust_file} has no usable keys: {exc}"
        ) from None


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


def verify_node(envelope_file: Path, trust_file: Path, manifest_file: Path) -> list[str]:
    """Reasons this node's image is not attested (empty: it is)."""
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
    verdict = (statement.get("predicate") or {}).get("verdict")
    if verdict != "pass":
        reasons.append(f"the attestation's verdict is {verdict!r}, not pass")
    return reasons
