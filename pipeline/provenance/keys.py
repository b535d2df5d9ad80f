"""The attestation signer and the keys a verifier trusts.

The signer is a securesystemslib private-key URI in ``$IMAGECTL_ATTESTATION_SIGNER``:

- ``file2:PATH``: a PEM (PKCS#8) private key file (tests, a single operator); refused
  when others may read it (mode & 0o077);
- ``awskms:KEY_ID``: an AWS KMS asymmetric SIGN_VERIFY key (boto3's credential chain);
- ``gcpkms:projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/V``: a Google
  Cloud KMS key version (Application Default Credentials);
- ``azurekms:VAULT/KEY``: an Azure Key Vault key (DefaultAzureCredential).

Unset, the signer is the state folder's ed25519 key (``keys/attestation.pem``, 0600,
public key beside it in ``keys/attestation.pub.json``) when it exists. Only ``imagectl
attest`` (and ``imagectl run``, the local demonstration, through ``ensure_local_key``)
creates it: nothing else makes a key, and no verifier ever does.

Verifiers trust the keys of a trust file ``{"keys": [{"keyid", "keytype", "scheme",
"keyval"}], "threshold": N}`` (``threshold``, default 1: how many distinct keys must
sign; each ``keyid`` must be the one securesystemslib computes from its key, and
unique; the file and every folder above it writable by nobody else and owned by this
user or root, symlinks resolved and checked: ``imagectl.core.trustpath.refusal``, which
checks the state folder's ``settings.toml`` that may name the file the same way):
``--trust FILE``, else ``$IMAGECTL_ATTESTATION_TRUST``, else the
repository's pinned anchor ``keys/attestation-trust.json`` (reviewed like code). A
missing, empty or foreign trust file is bad input (exit 2), never an empty trust. The
cloud SDKs load only when a KMS signer is used.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write, open_lock_file, private_dir
from imagectl.core.trustpath import refusal
from imagectl.paths import Workspace, find_workspace, state_dir
from imagectl.state_settings import setting_path, settings_path
from imagectl.validators.attestation import (
    BadAttestationInput,
    _read_json,
    parse_trust,
    threshold_of,
)

if TYPE_CHECKING:
    from securesystemslib.signer import Key, Signer


ENV_SIGNER = "IMAGECTL_ATTESTATION_SIGNER"
ENV_TRUST = "IMAGECTL_ATTESTATION_TRUST"
SCHEMES = ("file2", "awskms", "gcpkms", "azurekms")
TRUST_ANCHOR = Path("keys") / "attestation-trust.json"  # below the workspace root


@dataclass(frozen=True)
class SignerConfig:
    uri: str
    local: bool  # the state folder's key


def local_key() -> Path:
    return state_dir() / "keys" / "attestation.pem"


def local_public() -> Path:
    return state_dir() / "keys" / "attestation.pub.json"


def signer_uri() -> SignerConfig:
    """The configured signer; unset, the state folder's key, which must exist."""
    uri = os.environ.get(ENV_SIGNER, "").strip()
    if uri:
        scheme = uri.split(":", 1)[0]
        if scheme not in SCHEMES or ":" not in uri:
            raise UserError(
                f"${ENV_SIGNER}={uri[:60]!r} is not a signer this tool knows",
                hint=f"Use one of {', '.join(s + ':...' for s in SCHEMES)}, or unset it for "
                "the local key in the state folder",
            )
        return SignerConfig(uri, local=False)
    key = local_key()
    if not key.exists():
        raise NoSigner(
            f"no attestation signer: ${ENV_SIGNER} is unset and the state folder has no "
            f"key ({key})",
            hint=f"Set ${ENV_SIGNER} (e.g. awskms:KEY_ID), or create a local key with "
            "`imagectl attest --new-key` (the only command that makes one)",
        )
    return SignerConfig(f"file2:{key}", local=True)


class NoSigner(UserError):
    """No signer is configured and no local key exists (exit 2)."""


def ensure_local_key() -> Path:
    """Create the state folder's ed25519 key when missing (``imagectl attest`` and the
    local run only); returns the private key's path. Two first uses make one key."""
    key = local_key()
    if key.exists():
        return key
    from securesystemslib.signer import CryptoSigner

    folder = private_dir(key.parent)
    with open_lock_file(folder / ".attestation.lock") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not key.exists():
            signer = CryptoSigner.generate_ed25519()
            atomic_write(local_public(), trust_document([signer.public_key]))
            atomic_write(key, signer.private_bytes, mode=0o600)  # last: present means done
    return key


def load_signer() -> tuple[Signer, Key]:
    """(securesystemslib Signer, its public SSlibKey) for the configured signer URI."""
    from securesystemslib.signer import Signer

    cfg = signer_uri()
    scheme, rest = cfg.uri.split(":", 1)
    try:
        if scheme == "file2":
            return _file_signer(Path(rest))
        if scheme == "awskms":
            from securesystemslib.signer import AWSSigner

            uri, public = AWSSigner.import_(rest)
        elif scheme == "gcpkms":
            from securesystemslib.signer import GCPSigner

            uri, public = GCPSigner.import_(rest)
        else:
            from securesystemslib.signer import AzureSigner

            vault, _, key = rest.partition("/")
            uri, public = AzureSigner.import_(vault, key)
        return Signer.from_priv_key_uri(uri, public), public
    except UserError:
        raise
    except Exception as exc:  # the SDKs' and KMS's own errors: one paragraph, exit 2
        raise UserError(
            f"cannot load the attestation signer {cfg.uri}: {type(exc).__name__}: {exc}",
            hint=f"Check ${ENV_SIGNER} and that your credentials may use the key "
            "(kms:GetPublicKey and kms:Sign, or the cloud's equivalent)",
        ) from None


def _file_signer(path: Path) -> tuple[Signer, Key]:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    loose = refusal(path, "attestation key") if path.exists() else None
    if loose is not None:  # whoever can replace the key signs in this signer's name
        raise UserError(loose, where=str(path))
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise UserError(
                f"the attestation key {path} is readable or writable by others (mode "
                f"{mode:04o}): a signing key is its owner's alone",
                hint=f"chmod 600 {path}, and replace the key if others may have read it",
            )
        private = load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise UserError(
            f"cannot read the attestation key {path}: {exc}",
            where=str(path),
            hint="Give a PEM (PKCS#8) private key without a passphrase, or unset "
            f"${ENV_SIGNER} to use the state folder's key",
        ) from None
    signer = CryptoSigner(private)  # type: ignore[arg-type]
    return signer, signer.public_key


def trust_document(keys: list[Key]) -> str:
    doc: dict[str, object] = {"keys": [{"keyid": k.keyid, **k.to_dict()} for k in keys]}
    if threshold_of(keys) > 1:
        doc["threshold"] = threshold_of(keys)
    version = int(getattr(keys, "version", 1))
    if version > 1:  # a rotated anchor (validators.trust_rotation)
        doc["version"] = version
    return json.dumps(doc, indent=2) + "\n"


def trust_path(path: Path | None = None, workspace: Workspace | None = None) -> Path:
    """Which trust file applies, strongest first: ``path`` (``--trust``),
    ``$IMAGECTL_ATTESTATION_TRUST``, the state folder's settings (``attestation_trust`` in
    ``<state>/settings.toml``, ``imagectl.state_settings``), or the workspace's pinned
    anchor (``keys/attestation-trust.json``)."""
    if path:
        return Path(path)
    raw = os.environ.get(ENV_TRUST, "").strip()
    if raw:
        return Path(raw)
    saved = setting_path("attestation_trust")
    if saved is not None:
        return saved
    return (workspace or find_workspace()).root / TRUST_ANCHOR


def load_trust(path: Path | None = None, workspace: Workspace | None = None) -> list[Key]:
    """The public keys a verifier trusts (see the module docstring); a missing, empty or
    foreign file is bad input (exit 2). Never a key of its own making."""
    where = trust_path(path, workspace)
    try:
        return parse_trust(where)
    except BadAttestationInput as exc:
        raise UserError(str(exc), hint=trust_hint(where, workspace)) from None


def trust_hint(where: Path, workspace: Workspace | None = None) -> str:
    """What leads somewhere from a trust file that failed: never "trust the keys in" the
    very file that failed (the shipped anchor lists no key until a signer is enrolled)."""
    anchor = (workspace or find_workspace()).root / TRUST_ANCHOR
    elsewhere = (
        f"name a trust file that lists the signer's key: --trust FILE, ${ENV_TRUST}, or "
        f"the state folder's attestation_trust setting ({settings_path()}); a signer's "
        "public key is written by `imagectl verify --export-trust` where it is configured"
    )
    if where == anchor:
        return (
            f"The repository's anchor ({TRUST_ANCHOR}) lists no key until the production "
            "signer is enrolled (keys/README.md). For this state folder's own key (the local "
            "demonstration), trust it once: `imagectl attest --new-key --save-trust`; or "
            + elsewhere
        )
    return elsewhere[0].upper() + elsewhere[1:]


def image_trust(workspace: Workspace | None = None) -> dict[str, object]:
    """The trust document a build writes into the image: the pinned keys (or the
    configured trust file). An anchor that lists no key yet gives ``{}`` (the image
    writes no trust file and cannot require an attestation); a foreign one is exit 2."""
    where = trust_path(None, workspace)
    try:
        doc = _read_json(where, "trust file")
    except BadAttestationInput:
        doc = None  # load_trust says why
    if isinstance(doc, dict) and doc.get("keys") == [] and set(doc) == {"keys"}:
        return {}
    return json.loads(trust_document(load_trust(where)))
