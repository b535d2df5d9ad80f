"""The published revocation list: signed as a whole, versioned, expiring.

In the manner of TUF's timestamp and snapshot roles (see the trust-and-revocation
reference): one DSSE envelope (payload type ``application/vnd.imagectl.revocations+json``)
whose payload is ``{"_type": ".../revocations/v1", "version": N, "expires": T,
"revocations": [revocation envelope, ...]}``. Dropping an entry breaks its signature;
every verifier keeps the highest version it has seen and refuses a lower one
(rollback) and one past ``expires`` (freeze). That floor is kept per set of trusted keys
(``validators.attestation.floor_for``): a list a stolen key numbered far ahead (TUF's
fast-forward attack) binds only that key set, so rotating the trust anchor recovers, as
TUF's client deletes its trusted timestamp and snapshot metadata when their keys rotate
(specification, "Update the root role", 5.3.11); a new signer numbers its lists from its
own floor. ``imagectl revoke`` publishes a new list
beside the catalog (``<state>/attestations/revocations.json``); ``imagectl verify
--export-revocations`` signs a fresh one (a higher version, a new expiry) for deploy
jobs to place on nodes, where ``verify-node`` requires it.

An image is revoked when any of three stores says so: the catalog's revocations, the
published list, and the cloud's ``imagectl:revoked`` tag. ``verify`` and ``promote``
ask all three (``revocation_reasons``), so no single store can un-revoke an image.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.models import Image
from imagectl.clouds.base import Provider
from imagectl.clouds.sdk_errors import first_line
from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write
from imagectl.core.safetext import one_line
from imagectl.paths import state_dir
from imagectl.provenance.attest import canonical, member
from imagectl.tags import TAG_REVOKED
from imagectl.validators.attestation import (
    ENVELOPE_SUBJECT,
    REVOCATION_LIST_TYPE,
    REVOCATIONS_PAYLOAD_TYPE,
    BadAttestationInput,
    RevocationList,
    _bounded,
    _read_json,
    load_seen,
    open_revocation_list,
    record_seen,
    subjects,
)
from imagectl.validators.identity import first_mismatch, parse

if TYPE_CHECKING:
    from securesystemslib.signer import Key, Signer

DEFAULT_VALID_HOURS = 7 * 24  # a list nobody renews for a week is refused (freeze)


def list_file() -> Path:
    return state_dir() / "attestations" / "revocations.json"


def seen_file() -> Path:
    return state_dir() / "attestations" / "revocations-seen.json"


def _previous_version(keyid: str | None = None) -> int:
    """The highest version this state folder published or saw for lists ``keyid`` signs:
    a floor kept under a trust anchor without that key, and a list it did not sign, are
    another anchor's count (a rotated anchor starts its own, TUF 5.3.11)."""
    versions = [0]
    for read in (lambda: load_seen(seen_file()), lambda: _payload_of(list_file(), keyid)):
        try:
            doc = read()
        except (BadAttestationInput, OSError, ValueError, UserError):
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("version"), int):
            continue
        named = doc.get("keys")
        if keyid is not None and isinstance(named, list) and keyid not in named:
            continue
        versions.append(doc["version"])
    return max(versions)


def _payload_of(path: Path, keyid: str | None = None) -> object:
    if not path.exists():
        return None
    envelope = _read_json(path, "revocations file")
    if not isinstance(envelope, dict):
        return None
    signed_by = [s.get("keyid") for s in envelope.get("signatures") or [] if isinstance(s, dict)]
    if keyid is not None and keyid not in signed_by:
        return None  # another signer's list (a rotated anchor's, or a forged one)
    # only for its version (the next one must be higher), measured before parsing
    return _bounded(base64.b64decode(str(envelope.get("payload", ""))), "payload", str(path))


def sign_list(
    session: Session, signer: Signer, *, valid_hours: float = DEFAULT_VALID_HOURS,
    now: dt.datetime | None = None,
) -> dict[str, object]:  # fmt: skip
    """A new signed list of every recorded revocation: its version is higher than any
    this state folder published or saw (and never below the Unix time, so a lost state
    folder cannot restart the count below what nodes kept)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return list_envelope(
        [dict(r.envelope) for r in repo.revocations(session, None)],
        version=max(_previous_version(signer.public_key.keyid) + 1, int(now.timestamp())),
        expires=now + dt.timedelta(hours=valid_hours),
        signers=[signer],
    )


def list_envelope(
    entries: list[dict[str, object]],
    *,
    version: int,
    expires: dt.datetime,
    signers: list[Signer],
) -> dict[str, object]:
    """The DSSE envelope of a revocation list of ``entries`` (revocation envelopes),
    signed by each of ``signers``."""
    from securesystemslib.dsse import Envelope

    body = {
        "_type": REVOCATION_LIST_TYPE,
        "version": version,
        "expires": expires.isoformat(),
        "revocations": entries,
    }
    env = Envelope(payload=canonical(body), payload_type=REVOCATIONS_PAYLOAD_TYPE, signatures={})
    for signer in signers:
        env.sign(signer)
    doc: dict[str, object] = env.to_dict()
    return doc


def publish_list(session: Session, signer: Signer, keys: list[Key] | None = None,
                 *, valid_hours: float = DEFAULT_VALID_HOURS) -> dict[str, object]:  # fmt: skip
    """Sign a new list and write it beside the catalog (the version kept as seen)."""
    envelope = sign_list(session, signer, valid_hours=valid_hours)
    atomic_write(list_file(), json.dumps(envelope, indent=2) + "\n")
    if keys is not None:
        found, _ = open_revocation_list(envelope, keys, "the new revocation list")
        if found is not None:
            record_seen(seen_file(), found, load_seen(seen_file()), keys)
    return envelope


def published(
    keys: list[Key], path: Path | None = None, *, now: dt.datetime | None = None
) -> tuple[RevocationList | None, list[str]]:
    """The published list (``path``, else the one beside the catalog) if it holds, and
    the reasons it does not: signed otherwise, older than a version seen here, expired,
    or missing after one was seen. No list ever published or seen: (None, [])."""
    path = path or list_file()
    where = f"the revocation list {path}"
    try:
        seen = load_seen(seen_file())
    except BadAttestationInput as exc:
        return None, [str(exc)]
    if not path.exists() and not path.is_symlink():
        if seen:
            return None, [
                f"{where} is missing, yet version {seen.get('version')} was seen here: a "
                "list that disappears hides its revocations (publish one with `imagectl "
                "verify --export-revocations`)"
            ]
        return None, []
    try:
        found, reasons = open_revocation_list(
            _read_json(path, "revocations file"), keys, where, seen=seen, now=now
        )
    except BadAttestationInput as exc:
        return None, [str(exc)]
    if found is not None:
        try:
            record_seen(seen_file(), found, seen, keys)
        except UserError as exc:
            reasons.append(f"cannot keep the revocation list's version: {exc.message}")
    return found, reasons


def cloud_tag(provider: Provider | None, img: Image) -> tuple[str | None, list[str]]:
    """The cloud's ``imagectl:revoked`` tag on ``img`` (its digest), or why the cloud
    could not say (a reason: revocation is checked closed)."""
    if provider is None:
        return None, []
    try:
        found = provider.get_image(img.cloud_image_id, img.region)
    except Exception as exc:  # the SDKs' own errors: a reason, never a traceback
        return None, [
            f"cannot read {img.cloud}'s {TAG_REVOKED} tag of {img.cloud_image_id}: "
            f"{type(exc).__name__}: {first_line(exc)}"
        ]
    return (found.tags.get(TAG_REVOKED) if found is not None else None), []


def revoked_elsewhere(
    session: Session, img: Image, keys: Callable[[], list[Key]], provider: Provider | None
) -> list[str]:
    """What the published list and the cloud's tag say of ``img`` (the catalog's own rows
    are the caller's): a list entry naming the image or its attestation, the cloud's
    ``imagectl:revoked`` tag, or why the list is refused (rolled back, expired, gone).
    ``keys`` is called only when there is a list to check."""
    reasons: list[str] = []
    if list_file().exists() or list_file().is_symlink() or seen_file().exists():
        listed, refused = published(keys())
        reasons += refused
        if listed is not None:
            reasons += [
                f"the published revocation list (version {listed.version}) revokes it: {why}"
                for why in _named_by(session, img, listed.statements)
            ]
    tag, unreadable = cloud_tag(provider, img)
    reasons += unreadable
    if tag:
        reasons.append(f"the cloud's {TAG_REVOKED} tag names revocation {one_line(tag)[:19]}")
    return reasons


def _named_by(session: Session, img: Image, statements: list[dict[str, object]]) -> list[str]:
    """``revoked_by`` for a catalog image: its attestation's digest, or its identity."""
    own = repo.latest_attestation(session, img)
    seen = parse(img.cloud, img.cloud_image_id, img.region)
    found = []
    for statement in statements:
        named = list(subjects(statement))
        by_digest = own is not None and f"{ENVELOPE_SUBJECT}{own.digest}" in named
        images = [n for n in named if n.startswith("image:")]
        if by_digest or (images and first_mismatch(images, seen, whole=False) is None):
            found.append(one_line(member(statement, "predicate").get("reason", "no reason")))
    return found
