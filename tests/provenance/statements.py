"""One good attestation for the trust tests: a passing statement for one AWS image and its
envelope signed by a given key, so each test changes only what it is about (the trust file,
a folder's mode, a revocation list)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from securesystemslib.signer import CryptoSigner

from imagectl.provenance.attest import sign_statement
from imagectl.provenance.statement import build_statement

AMI = "ami-0123456789abcdef0"
IMAGE = f"us-east-1/111122223333/{AMI}"


def good_statement(manifest_sha256: str = "cd" * 32, ami: str = AMI) -> dict[str, Any]:
    """A statement of a passing build of h100-training for ``ami`` in us-east-1."""
    return build_statement(
        cloud="aws", region="us-east-1", cloud_image_id=ami, stack="h100-training",
        stack_digest="ab" * 32, manifest_sha256=manifest_sha256, build_id="b-1",
        receipts=[{"verdict": "pass", "image_id": ami}], verdict="pass", attested_by="ci",
        attested_at="2026-11-28T00:00:00+00:00",
        identities={("us-east-1", ami): f"aws/us-east-1/111122223333/{ami}"},
    )  # fmt: skip


def signed_envelope(
    signer: CryptoSigner, folder: Path, statement: dict[str, Any] | None = None
) -> Path:
    """``folder/env.json``: ``statement`` (the good one by default) signed by ``signer``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "env.json"
    path.write_text(json.dumps(sign_statement(statement or good_statement(), signer)))
    return path
