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

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from imagectl.core.boundedjson import parse_bounded
from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write_json
from imagectl.core.safetext import one_line
from imagectl.core.trustpath import refusal
from imagectl.validators import identity

if TYPE_CHECKING:
    from securesystemslib.signer import Key

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://imagectl.dev/attestation/validation/v1"
REVOCATION_TYPE = "https://imagectl.dev/attestation/revocation/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MANIFEST_SUBJECT = "manifest:/etc/imagectl/manifest.json"
REVOCATIONS_PAYLOAD_TYPE = "application/vnd.imagectl.revocations+json"
REVOCATION_LIST_TYPE = "https://imagectl.dev/revocations/v1"
ENVELOPE_SUBJECT = "attestation:"  # a revocation's subject: attestation:sha256-<hex>
MAX_FILE_BYTES = 64 * 1024 * 1024  # an envelope carries receipts; nothing sane is larger


class BadAttestationInput(Exception):
    """A file is missing or not what it should be (the message names it)."""


# Bounds for outside JSON (imagectl.core.boundedjson measures before parsing): a trust file is
# a few keys; an envelope and its payload carry receipts; a revocation list carries one
# envelope per revocation.
LIMITS: dict[str, tuple[int, int]] = {  # what -> (bytes, nesting depth)
    "trust file": (1 << 20, 8),
    "attestation": (MAX_FILE_BYTES, 8),
    "revocations file": (MAX_FILE_BYTES, 8),
    "payload": (MAX_FILE_BYTES, 48),
    "revocation list": (MAX_FILE_BYTES, 16),
    "trust rotation": (1 << 20, 8),
}


def _bounded(data: bytes | str, what: str, where: str) -> object:
    max_bytes, max_depth = LIMITS.get(what, (MAX_FILE_BYTES, 16))
    try:
        return parse_bounded(
            data, kind=what, where=where, hint="", max_bytes=max_bytes, max_depth=max_depth
        )
    except UserError as exc:
        raise BadAttestationInput(
            exc.message if exc.where is None else f"{where}: {exc.message}"
        ) from None


def check_file(path: Path, what: str) -> Path:
    """``path`` with its symlinks resolved, refused (``BadAttestationInput``) when others
    may change it (``imagectl.core.trustpath.refusal``, the one check for every path that
    decides trust): the file and every folder above it (for a symlink, above the link too)
    must belong to this user or root and be writable by neither group nor others (a folder
    with the sticky bit, like /tmp, may be). A trust file others can write is a trust
    anchor anyone can bend; the signing key gets the same check."""
    why = refusal(path, what)
    if why is not None:
        raise BadAttestationInput(why)
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise BadAttestationInput(f"cannot read the {what} {path}: {_why(exc)}") from None


def _why(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def _read_json(path: Path, what: str) -> object:
    target = check_file(path, what)
    try:
        if target.stat().st_size > LIMITS.get(what, (MAX_FILE_BYTES, 0))[0]:
            raise BadAttestationInput(
                f"the {what} {path} is larger than {LIMITS.get(what, (MAX_FILE_BYTES, 0))[0]} bytes"
            )
        data = target.read_bytes()
    except OSError as exc:
        raise BadAttestationInput(f"cannot read the {what} {path}: {_why(exc)}") from None
    if not data.strip():
        raise BadAttestationInput(f"the {what} {path} is empty")
    return _bounded(data, what, f"the {what} {path}")


class TrustedKeys(list):  # type: ignore[type-arg]
    """The keys of a trust file, how many of them must sign (``threshold``), and the
    trust document's ``version`` (1 unless it says; a signed rotation,
    ``validators.trust_rotation``, must be exactly the next one)."""

    threshold: int = 1
    version: int = 1


def threshold_of(keys: list[Key]) -> int:
    return int(getattr(keys, "threshold", 1))


TRUST_FIELDS = {"keys", "threshold", "version"}


def parse_trust(trust_file: Path) -> TrustedKeys:
    """The keys of a trust file and its threshold. Missing, empty, foreign or keyless is
    bad input; so is a key whose ``keyid`` is not the one securesystemslib computes from
    the key (``compute_default_keyid``: sha256 of the canonical JSON of keytype, scheme
    and keyval), two entries with one key id, a threshold that is not a whole number
    from 1 to the number of keys, and any field this check does not support."""
    doc = _read_json(trust_file, "trust file")
    return trust_from(doc, f"the trust file {trust_file}")


def trust_from(doc: object, where: str) -> TrustedKeys:
    from securesystemslib.signer import SSlibKey
    from securesystemslib.signer._utils import compute_default_keyid

    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise BadAttestationInput(f'{where} is not a trust document ({{"keys": [...]}})')
    entries = doc["keys"]
    unknown = sorted(set(doc) - TRUST_FIELDS)
    if unknown:
        raise BadAttestationInput(
            f"{where} asks for {', '.join(map(repr, unknown))}, which this check does not "
            "support (a trust file has keys, an optional threshold and version): refused rather "
            "than ignored"
        )
    if not entries:
        raise BadAttestationInput(f"{where} lists no key: it trusts nobody")
    keys = TrustedKeys()
    for i, entry in enumerate(entries):
        try:
            fields = {f: v for f, v in entry.items() if f != "keyid"}
            computed = compute_default_keyid(entry["keytype"], entry["scheme"], entry["keyval"])
            key = SSlibKey.from_dict(str(entry["keyid"]), fields)
        except Exception as exc:  # KeyError, TypeError, ValueError, securesystemslib's own
            raise BadAttestationInput(
                f"{where} holds a key (entry {i}) that is not a public key: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        if key.keyid != computed:
            raise BadAttestationInput(
                f"{where}: entry {i}'s keyid {str(key.keyid)[:16]}... is not its key's "
                f"({computed[:16]}..., sha256 of the key's canonical JSON): a key id must "
                "be computed from its key"
            )
        if any(k.keyid == key.keyid for k in keys):
            raise BadAttestationInput(f"{where} lists key {key.keyid[:16]}... twice")
        keys.append(key)
    threshold = doc.get("threshold", 1)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int)
        or not (1 <= threshold <= len(keys))
    ):
        raise BadAttestationInput(
            f"{where} asks for a threshold of {str(threshold)[:20]!r}: it must be a whole "
            f"number from 1 to its {len(keys)} key(s)"
        )
    keys.threshold = threshold
    version = doc.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < 2**53:
        raise BadAttestationInput(
            f"{where} has the version {str(version)[:20]!r}: it must be a whole number from 1"
        )
    keys.version = version
    return keys


def trusted_keys(trust_file: Path) -> TrustedKeys:
    return parse_trust(trust_file)


def _signed_payload(
    envelope: object, keys: list[Key], where: str, payload_type: str
) -> tuple[object, list[str]]:
    """(the parsed payload, reasons) of a DSSE envelope: its signatures are checked
    first, by ``threshold_of(keys)`` distinct trusted keys, and only then is the payload
    parsed (bounded). A bad signature or another payload type is a reason and nothing
    is parsed; a document that is not an envelope is bad input."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    try:
        env = Envelope.from_dict(json.loads(json.dumps(envelope)))  # from_dict edits its input
    except Exception as exc:  # KeyError, TypeError, binascii.Error: not an envelope
        raise BadAttestationInput(
            f"{where} is not a DSSE envelope ({type(exc).__name__})"
        ) from None
    if env.payload_type != payload_type:
        return None, [f"{where} carries {_shown(env.payload_type, 80)!r}, not {payload_type}"]
    threshold = threshold_of(keys)
    try:
        env.verify(keys, threshold)
    except (VerificationError, ValueError):
        need = f"{threshold} distinct trusted keys" if threshold > 1 else "a trusted key"
        return None, [f"{where} is not signed by {need}"]
    return _bounded(env.payload, "payload", f"{where}'s payload"), []


def _shown(value: object, limit: int = 400) -> str:
    """``value`` inert (``imagectl.core.safetext``: no escape sequence or bidi control from a
    statement reaches a terminal) on one line, at most ``limit`` characters."""
    text = one_line(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def statement_of(
    envelope: dict[str, object], keys: list[Key], where: str
) -> tuple[dict[str, object] | None, list[str]]:
    """(the statement, reasons) of a DSSE envelope: a bad signature is a reason (and the
    payload is then not parsed: None)."""
    statement, reasons = _signed_payload(envelope, keys, where, PAYLOAD_TYPE)
    if statement is None:
        return None, reasons
    if not isinstance(statement, dict):
        raise BadAttestationInput(f"{where}: the payload is not a statement object")
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        reasons.append(f"{where} is not an imagectl validation statement")
    return statement, reasons


def subjects(statement: dict[str, object]) -> dict[str, object]:
    listed = statement.get("subject")
    return {
        str(s.get("name")): _sha256_of(s.get("digest"))
        for s in (listed if isinstance(listed, list) else [])
        if isinstance(s, dict)
    }


def _sha256_of(digest: object) -> object:
    return digest.get("sha256") if isinstance(digest, dict) else None


def name_digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def image_subjects(statement: dict[str, object]) -> list[str]:
    """The statement's ``image:<cloud>/<region>/<id>`` subjects whose digest is their
    name's (the form the controller signs)."""
    return [
        name
        for name, digest in subjects(statement).items()
        if name.startswith("image:") and digest == name_digest(name)
    ]


def _cloud_of(text: str) -> str | None:
    """The cloud a raw image id's form names (clouds.yaml's ``identity.recognise``)."""
    return identity.recognised_cloud(text)


def image_reason(
    statement: dict[str, object],
    image_id: str,
    cloud: str | None,
    where: str,
    *,
    region: str | None = None,
    whole: bool = True,
    label: str | None = None,
) -> str | None:
    """None when a signed image subject is ``image_id`` (on ``cloud``; in ``region``
    where given), compared whole (``imagectl.validators.identity.mismatch``); else the
    reason, naming what differs."""
    signed = image_subjects(statement)
    clouds = [cloud] if cloud else [_cloud_of(image_id)]
    if clouds == [None]:  # the caller did not say: each signed image's own cloud
        clouds = list(dict.fromkeys(s.removeprefix("image:").partition("/")[0] for s in signed))
    why = None
    for c in clouds or ["?"]:
        why = identity.first_mismatch(signed, identity.parse(str(c), image_id, region), whole=whole)
        if why is None:
            return None
    shown = ", ".join(_shown(s) for s in signed) or "no image"
    return f"{where} attests {shown}, not {label or _shown(image_id)} ({_shown(why)})"


def names_image(statement: dict[str, object], image_id: str, cloud: str | None = None) -> bool:
    """Does a signed image subject name ``image_id``, compared whole (``image_reason``)?"""
    return image_reason(statement, image_id, cloud, "") is None


def judged_whole(statement: dict[str, object], where: str) -> list[str]:
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
    image: dict[str, object] = found if isinstance(found, dict) else {}
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


def revocation_statements(entries: object, keys: list[Key], where: str) -> list[dict[str, object]]:
    """The trusted revocation statements among ``entries`` (revocation envelopes): an
    envelope not signed by a trusted key is ignored (anyone may write one; one trusted
    key may revoke, as revoking only ever refuses more). Not a list, or an entry that is
    not an envelope: bad input."""
    if not isinstance(entries, list):
        raise BadAttestationInput(f"{where} is not a list of revocations")
    one = TrustedKeys(keys)  # threshold 1
    out = []
    for entry in entries:
        try:
            statement, reasons = _signed_payload(entry, one, where, PAYLOAD_TYPE)
        except BadAttestationInput:
            raise BadAttestationInput(
                f"{where} holds an entry that is not a DSSE envelope"
            ) from None
        if (
            not reasons
            and isinstance(statement, dict)
            and statement.get("predicateType") == REVOCATION_TYPE
        ):
            out.append(statement)
    return out


def revocations_of(doc: object, keys: list[Key], where: str) -> list[dict[str, object]]:
    """The trusted revocation statements of the catalog's own rows (``{"revocations":
    [envelope, ...]}``); what comes from outside is a signed list
    (``open_revocation_list``)."""
    entries = doc.get("revocations") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise BadAttestationInput(f"{where} is not a revocations document")
    return revocation_statements(entries, keys, where)


@dataclass(frozen=True)
class RevocationList:
    """A signed revocation list that holds: its version, expiry and trusted entries."""

    version: int
    expires: dt.datetime
    digest: str  # sha256-<hex> of the list's envelope
    statements: list[dict[str, object]]


def _version_of(seen: dict[str, object]) -> int:
    """The version kept in ``seen`` (``load_seen`` keeps only a whole number; 0: none)."""
    version = seen.get("version") or 0
    return int(version) if isinstance(version, (int, str, float)) else 0


def _when(value: object) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else None


def open_revocation_list(
    doc: object,
    keys: list[Key],
    where: str,
    *,
    seen: dict[str, object] | None = None,
    now: dt.datetime | None = None,
) -> tuple[RevocationList | None, list[str]]:
    """(the list, reasons it is refused) of a signed revocation list, in the manner of
    TUF's timestamp and snapshot metadata: the whole list is one DSSE envelope signed by
    ``threshold_of(keys)`` trusted keys (an entry dropped breaks it), with a ``version``
    that only increases and an ``expires`` time. Refused: a list signed otherwise, one
    whose version is lower than ``seen`` (the highest this verifier kept: rollback) or
    equal to it with other contents, and one past its expiry (freeze). The version kept
    is a floor for the set of trusted keys it was kept under (``floor_for``): a rotated
    trust anchor starts its own, as TUF's client deletes its trusted timestamp and
    snapshot metadata when their keys rotate (specification, 5.3.11)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    if isinstance(doc, dict) and "revocations" in doc and "payload" not in doc:
        return None, [
            f"{where} is an unsigned list of revocations (dropping an entry from it would "
            "go unnoticed): only a signed, versioned list counts (`imagectl verify "
            "--export-revocations`)"
        ]
    body, reasons = _signed_payload(doc, keys, where, REVOCATIONS_PAYLOAD_TYPE)
    if body is None:
        return None, reasons
    if not isinstance(body, dict) or body.get("_type") != REVOCATION_LIST_TYPE:
        return None, [f"{where} is not an imagectl revocation list"]
    version, expires = body.get("version"), _when(body.get("expires"))
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return None, [f"{where} has no version (a whole number from 1)"]
    if expires is None:
        return None, [f"{where} has no expiry (an ISO 8601 time with its zone)"]
    digest = envelope_digest(doc)
    reasons = []
    if expires <= now:
        reasons.append(
            f"{where} (version {version}) expired at {expires.isoformat()}: a list nobody "
            "renewed may hide newer revocations (freeze); publish a fresh one"
        )
    seen = floor_for(seen, keys)
    if seen:
        kept = _version_of(seen)
        if version < kept:
            reasons.append(
                f"{where} is version {version}, older than version {kept} already seen "
                f"here (rollback): refused. {FAST_FORWARD_RECOVERY}"
                + ("" if isinstance(seen.get("keys"), list) else LEGACY_FLOOR)
            )
        elif version == kept and seen.get("digest") not in (None, digest):
            reasons.append(
                f"{where} is version {version}, seen here before with other contents: refused"
            )
    if reasons:
        return None, reasons
    statements = revocation_statements(body.get("revocations"), keys, where)
    return RevocationList(version, expires, digest, statements), []


FAST_FORWARD_RECOVERY = (
    "If that version came from a stolen signing key (a fast-forward attack: a list "
    "numbered far ahead so that every correct one looks older), no list signed by the "
    "same keys can pass here again; recover by rotating the trust anchor, as TUF does "
    "(specification, 5.3.4-5.3.11): sign a trust document that lists the new signer's key "
    "and not the stolen one with a threshold of the current keys and of its own "
    "(`imagectl verify --sign-trust NEW.json`, once per key holder) and install it with "
    "`imagectl verify --rotate-trust ROTATION.json` (on a node, `imagectl verify-node "
    "--rotate-trust ROTATION.json`), or have root install that trust file (`imagectl "
    "verify --export-trust` where the new signer is configured writes it); then publish a "
    "list it signs (`imagectl verify --export-revocations`). The version floor is kept per "
    "set of trusted keys and a rotation resets it, so the new keys start from their own; "
    "nothing has to be deleted by hand"
)


LEGACY_FLOOR = (
    " (this floor was kept before floors named their keys, so it binds every key set: "
    "after installing the new trust file, remove revocations-seen.json once)"
)


def trust_set(keys: list[Key]) -> list[str]:
    """The key ids (sorted) a version floor is kept under."""
    return sorted(str(k.keyid) for k in keys)


def floor_for(seen: dict[str, object] | None, keys: list[Key]) -> dict[str, object] | None:
    """The kept version that binds lists checked with ``keys``: the floor recorded under
    the same set of trusted keys. A floor kept under another set belongs to a trust
    anchor that has since rotated (the trust file is itself checked: only its owner or
    root can change it), so it binds nothing here: TUF's client, after a root rotation
    that changes the timestamp or snapshot keys, deletes its trusted timestamp and
    snapshot metadata to recover from a fast-forward attack (specification, "Update the
    root role", 5.3.11). A floor kept before floors named their keys binds every set."""
    if not seen:
        return None
    named = seen.get("keys")
    if isinstance(named, list) and named != trust_set(keys):
        return None
    return seen


def load_seen(path: Path) -> dict[str, object] | None:
    """The highest revocation list version this verifier kept (None: none yet)."""
    if not path.exists() and not path.is_symlink():
        return None
    doc = _read_json(path, "revocation state")
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), int):
        raise BadAttestationInput(
            f"the revocation state {path} is not one (remove it only "
            "if you know no newer list was seen)"
        )
    return doc


def record_seen(
    path: Path, found: RevocationList, seen: dict[str, object] | None, keys: list[Key]
) -> None:
    """Keep ``found``'s version, under the trusted keys it was checked with, when it is
    higher than the floor ``seen`` holds for those keys (``floor_for``); a floor of
    another set of keys (a rotated anchor) is replaced."""
    floor = floor_for(seen, keys)
    if floor and _version_of(floor) >= found.version and floor.get("keys") is not None:
        return
    if floor and _version_of(floor) > found.version:
        return
    atomic_write_json(
        path, {"version": found.version, "digest": found.digest,
               "expires": found.expires.isoformat(), "keys": trust_set(keys)}, indent=2,
    )  # fmt: skip


def revoked_by(
    revocations: list[dict[str, object]], statement: dict[str, object], digest: str | None
) -> list[str]:
    """Reasons a trusted revocation names this attestation (its envelope digest) or one
    of its images (compared by identity: a revocation naming an image by its short id
    revokes it too)."""
    mine = image_subjects(statement)
    reasons = []
    for revocation in revocations:
        named = list(subjects(revocation))
        hit = bool(digest and f"{ENVELOPE_SUBJECT}{digest}" in named)
        for name in named if not hit else []:
            ref = identity.from_subject(name)
            if ref is not None and identity.first_mismatch(mine, ref, whole=False) is None:
                hit = True
                break
        if hit:
            found = revocation.get("predicate")
            predicate = found if isinstance(found, dict) else {}
            reasons.append(
                f"revoked by {_shown(predicate.get('revoked_by', 'an operator'))} at "
                f"{_shown(predicate.get('revoked_at', '?'))}: "
                f"{_shown(predicate.get('reason', 'no reason'))}"
            )
    return reasons


def envelope_digest(envelope: object) -> str:
    body = json.dumps(envelope, sort_keys=True, separators=(",", ":"), default=str).encode()
    return "sha256-" + hashlib.sha256(body).hexdigest()


def verify_node(
    envelope_file: Path,
    trust_file: Path,
    manifest_file: Path,
    *,
    image_id: str | None,
    cloud: str | None = None,
    region: str | None = None,
    revocations_file: Path | None = None,
    seen_file: Path | None = None,
    now: dt.datetime | None = None,
) -> list[str]:
    """Reasons this node's image is not attested (empty: it is). ``image_id``: what the
    instance metadata says this node booted from (None: it could not tell, a reason).
    The node requires an attestation, so a missing revocation list is a reason (fail
    closed); a list that holds raises the version kept in ``seen_file``."""
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
            f"the attestation is for manifest {_shown(attested)[:12]}, but this image's "
            f"{manifest_file} is {manifest[:12]}: it attests another image"
        )
    if not image_id:
        reasons.append(
            "the instance metadata does not say which image this node booted from, so the "
            "attestation cannot be matched to it"
        )
    else:
        why = image_reason(
            statement, image_id, cloud, "the attestation", region=region,
            label=f"this node's image {_shown(image_id)}",
        )  # fmt: skip
        if why:
            reasons.append(why)
    reasons += judged_whole(statement, "the attestation")
    if revocations_file is None or not (revocations_file.exists() or revocations_file.is_symlink()):
        reasons.append(
            f"no revocation list at {revocations_file}: this image requires an attestation, "
            "so without the signed list of revocations it fails closed (place `imagectl "
            "verify --export-revocations` there)"
        )
        return reasons
    where = f"the revocation list {revocations_file}"
    seen = load_seen(seen_file) if seen_file is not None else None
    found, refused = open_revocation_list(
        _read_json(revocations_file, "revocations file"), keys, where, seen=seen, now=now
    )
    if found is None:
        return reasons + refused
    reasons += revoked_by(found.statements, statement, envelope_digest(envelope))
    if seen_file is not None:
        try:
            record_seen(seen_file, found, seen, keys)
        except Exception as exc:  # UserError from atomic_write: the node cannot keep it
            reasons.append(f"cannot keep the revocation list's version in {seen_file}: {exc}")
    return reasons
