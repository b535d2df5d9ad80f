"""The attestation signer and the keys a verifier trusts.

The signer is a securesystemslib private-key URI in ``$IMAGECTL_ATTESTATION_SIGNER``:

- ``file2:PATH``: a PEM (PKCS#8) private key file (tests, a single operator);
- ``awskms:KEY_ID``: an AWS KMS asymmetric SIGN_VERIFY key (boto3's credential chain);
- ``gcpkms:projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/V``: a Google
  Cloud KMS key version (Application Default Credentials);
- ``azurekms:VAULT/KEY``: an Azure Key Vault key (DefaultAzureCredential).

Unset, the local default is an ed25519 key in the state folder
(``keys/attestation.pem``, 0600), made on first use, with its public key beside it
(``keys/attestation.pub.json``) for verifiers elsewhere.

Verifiers trust the keys listed in ``$IMAGECTL_ATTESTATION_TRUST`` (or ``--trust``): a
JSON file ``{"keys": [{"keyid", "keytype", "scheme", "keyval"}]}`` as ``imagectl verify
--export-trust`` writes it. Unset, they trust the configured signer's public key. The
cloud SDKs load only when a KMS signer is used.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.errors import UserError
from imagectl.fsutil import atomic_write, open_lock_file, private_dir
from imagectl.paths import state_dir

ENV_SIGNER = "IMAGECTL_ATTESTATION_SIGNER"
ENV_TRUST = "IMAGECTL_ATTESTATION_TRUST"
SCHEMES = ("file2", "awskms", "gcpkms", "azurekms")


@dataclass(frozen=True)
class SignerConfig:
    uri: str
    generated: bool  # the local default key


def signer_uri() -> SignerConfig:
    uri = os.environ.get(ENV_SIGNER, "").strip()
    if uri:
        scheme = uri.split(":", 1)[0]
        if scheme not in SCHEMES or ":" not in uri:
            raise UserError(
                f"${ENV_SIGNER}={uri[:60]!r} is not a signer this tool knows",
                hint=f"Use one of {', '.join(s + ':...' for s in SCHEMES)}, or unset it for "
                "the local key in the state folder",
            )
        return SignerConfig(uri, generated=False)
    return SignerConfig(f"file2:{_default_key()}", generated=True)


def _default_key() -> Path:
    folder = state_dir() / "keys"
    key = folder / "attestation.pem"
    if key.exists():
        return key
    from securesystemslib.signer import CryptoSigner

    private_dir(folder)
    with open_lock_file(folder / ".attestation.lock") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)  # two first uses make one key
        if not key.exists():
            signer = CryptoSigner.generate_ed25519()
            atomic_write(folder / "attestation.pub.json", trust_document([signer.public_key]))
            atomic_write(key, signer.private_bytes, mode=0o600)  # last: present means done
    return key


def load_signer() -> tuple[Any, Any]:
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


def _file_signer(path: Path) -> tuple[Any, Any]:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    try:
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


def trust_document(keys: list[Any]) -> str:
    return json.dumps({"keys": [{"keyid": k.keyid, **k.to_dict()} for k in keys]}, indent=2) + "\n"


def load_trust(path: Path | None = None) -> list[Any]:
    """The public keys a verifier trusts: ``path``, ``$IMAGECTL_ATTESTATION_TRUST``, or
    the configured signer's own public key."""
    from securesystemslib.signer import SSlibKey

    raw = str(path) if path else os.environ.get(ENV_TRUST, "").strip()
    if not raw:
        return [load_signer()[1]]
    where = Path(raw)
    try:
        doc = json.loads(where.read_text())
        return [
            SSlibKey.from_dict(k["keyid"], {f: v for f, v in k.items() if f != "keyid"})
            for k in doc["keys"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"cannot read the trusted keys in {where}: {type(exc).__name__}: {exc}",
            where=str(where),
            hint="Write it with `imagectl verify --export-trust > FILE` where the signer is "
            "configured",
        ) from None
