"""Rotating the trust anchor by a signed trust document: TUF's root rotation.

A trust file is installed in one of two ways. Root (or the file's owner) writes it on the
node or the controller (the image's ``/etc/imagectl/attestation-trust.json``, the state
folder's ``attestation_trust``): believed because only they can write it
(``imagectl.core.trustpath``). Or the keys already trusted sign the next one, and
``rotate`` installs it in place of the current file after the checks of the TUF
specification's client workflow, "Update the root role" (v1.0.x, 5.3):

- 5.3.4 (arbitrary software attack): the new document is signed by a threshold of the
  keys of the trusted document (version N) AND by a threshold of its own keys, each
  counted by distinct key (``attestation._signed_payload``); the payload is parsed only
  after the old keys' signatures hold (DSSE: verify, then parse);
- 5.3.5 (rollback attack): its version is exactly N+1; an older or equal one is a
  rollback, a later one skips a document, and both are refused (5.3.9: apply each
  document in turn);
- 5.3.7-5.3.8: the new document becomes the trusted one and is written in place of the
  trust file (atomically, readable by all, as the build writes it);
- 5.3.11 (fast-forward recovery): when the keys changed, the revocation list's version
  floor (``revocations-seen.json``, TUF's trusted timestamp/snapshot) is deleted, so lists
  the new keys sign start from their own count after a stolen key numbered one far ahead.

Not carried over: 5.3.10's expiry (a trust document has none: it is an anchor, renewed
by rotation) and 5.3.12 (consistent snapshots: there are no targets here). Refusals are
``BadAttestationInput`` naming the file, the rule and its section; nothing is written
unless every check holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from imagectl.core.fsutil import atomic_write
from imagectl.validators.attestation import (
    BadAttestationInput,
    TrustedKeys,
    _read_json,
    _signed_payload,
    check_file,
    load_seen,
    parse_trust,
    threshold_of,
    trust_from,
    trust_set,
)

if TYPE_CHECKING:
    from securesystemslib.signer import Key, Signer

TRUST_PAYLOAD_TYPE = "application/vnd.imagectl.trust+json"
TRUST_DOCUMENT_TYPE = "https://imagectl.dev/trust/v1"


def document(keys: list[Key], version: int) -> dict[str, object]:
    """The trust document of ``keys`` (their threshold) at ``version``."""
    doc: dict[str, object] = {"keys": [{"keyid": k.keyid, **k.to_dict()} for k in keys]}
    if threshold_of(keys) > 1:
        doc["threshold"] = threshold_of(keys)
    doc["version"] = version
    return doc


def sign(doc: dict[str, object], signers: list[Signer],
         envelope: dict[str, object] | None = None) -> dict[str, object]:  # fmt: skip
    """A rotation envelope of the trust document ``doc`` signed by each of ``signers``
    (old keys and new); with ``envelope``, its payload signed again (each holder of a key
    adds a signature in turn)."""
    from securesystemslib.dsse import Envelope

    if envelope is not None:
        env = Envelope.from_dict(json.loads(json.dumps(envelope)))
    else:
        body = {"_type": TRUST_DOCUMENT_TYPE, **doc}
        payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        env = Envelope(payload=payload, payload_type=TRUST_PAYLOAD_TYPE, signatures={})
    for signer in signers:
        env.sign(signer)
    out: dict[str, object] = env.to_dict()
    return out


def next_document(envelope: object, trusted: TrustedKeys, where: str) -> TrustedKeys:
    """The keys of the signed trust document ``envelope`` once it may follow ``trusted``
    (5.3.4 and 5.3.5); refused otherwise (``BadAttestationInput``)."""
    body, reasons = _signed_payload(envelope, trusted, where, TRUST_PAYLOAD_TYPE)
    if body is None:  # 5.3.4 (1): the keys trusted now must vouch for it
        raise BadAttestationInput(
            f"{reasons[0]} of the trust document in use (version {trusted.version}): a new "
            "trust document needs a threshold of the current keys' signatures (TUF "
            "specification 5.3.4); refused, the trust file is unchanged"
        )
    if not isinstance(body, dict) or body.get("_type") != TRUST_DOCUMENT_TYPE:
        raise BadAttestationInput(f"{where} is not an imagectl trust document")
    new = trust_from({k: v for k, v in body.items() if k != "_type"}, where)
    _, own = _signed_payload(envelope, new, where, TRUST_PAYLOAD_TYPE)
    if own:  # 5.3.4 (2): and its own keys, so nobody is handed keys they cannot use
        raise BadAttestationInput(
            f"{own[0]} of the new trust document (version {new.version}): it must be "
            "signed by a threshold of its own keys too (TUF specification 5.3.4); refused, "
            "the trust file is unchanged"
        )
    expected = trusted.version + 1
    if new.version <= trusted.version:  # 5.3.5
        raise BadAttestationInput(
            f"{where} is version {new.version}, not newer than the trust document in use "
            f"(version {trusted.version}): a rollback to an older trust anchor (TUF "
            "specification 5.3.5); refused, the trust file is unchanged"
        )
    if new.version != expected:
        raise BadAttestationInput(
            f"{where} is version {new.version}, but the next trust document is version "
            f"{expected}: each version must be applied in turn, signed by the one before "
            "(TUF specification 5.3.5 and 5.3.9); apply version "
            f"{expected} first; the trust file is unchanged"
        )
    return new


def rotate(trust_file: Path, rotation: Path, seen_file: Path | None) -> tuple[TrustedKeys, bool]:
    """Install the signed trust document in ``rotation`` in place of ``trust_file``
    (checked as every trust file is), after 5.3.4-5.3.5; then (5.3.11) delete the
    revocation floor in ``seen_file`` when the keys changed. Returns the new keys and
    whether the floor was reset."""
    trusted = parse_trust(trust_file)
    where = f"the trust rotation {rotation}"
    new = next_document(_read_json(rotation, "trust rotation"), trusted, where)
    target = check_file(trust_file, "trust file")  # the file itself, through any link
    rotated = trust_set(new) != trust_set(trusted)
    # read before anything is written: a floor file others can change is refused here
    floor = load_seen(seen_file) if seen_file is not None and rotated else None
    atomic_write(target, json.dumps(document(new, new.version), indent=2) + "\n", mode=0o644)
    if seen_file is not None and floor is not None:
        seen_file.unlink(missing_ok=True)
    return new, floor is not None
