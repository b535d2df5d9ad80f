"""Attestation signers: the local key file and AWS KMS (against moto's KMS).

The KMS signer is securesystemslib's ``AWSSigner`` reaching KMS through boto3: moto
answers GetPublicKey and Sign as KMS does (an asymmetric SIGN_VERIFY key,
https://docs.aws.amazon.com/kms/latest/APIReference/API_Sign.html), and the envelope must
verify with the public key KMS hands out, and not with another key.
"""

from __future__ import annotations

import json
import os
import stat

import boto3
import pytest
from moto import mock_aws
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner

from imagectl.errors import UserError
from imagectl.provenance.attest import sign_statement
from imagectl.provenance.keys import load_signer, load_trust
from imagectl.provenance.statement import build_statement
from tests.fakes import moto_kms

STATEMENT = build_statement(
    cloud="aws",
    region="us-east-1",
    cloud_image_id="ami-0123456789abcdef0",
    stack="h100-training",
    stack_digest="ab" * 32,
    receipts=[{"verdict": "pass", "host": {"manifest_sha256": "cd" * 32}}],
    verdict="pass",
    attested_by="ci",
    attested_at="2026-11-25T00:00:00+00:00",
)


def _verifies(envelope: dict, keys: list) -> bool:
    try:
        Envelope.from_dict(json.loads(json.dumps(envelope))).verify(keys, 1)
    except VerificationError:
        return False
    return True


def test_the_statement_names_image_stack_and_manifest() -> None:
    names = {s["name"]: s["digest"]["sha256"] for s in STATEMENT["subject"]}
    assert set(names) == {
        "image:aws/us-east-1/ami-0123456789abcdef0",
        "stack:h100-training",
        "manifest:/etc/imagectl/manifest.json",
    }
    assert names["manifest:/etc/imagectl/manifest.json"] == "cd" * 32


def test_the_local_default_key_is_private_and_stable() -> None:
    first_signer, first_key = load_signer()
    key_file = os.path.join(os.environ["IMAGECTL_STATE_DIR"], "keys", "attestation.pem")
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    _again, second_key = load_signer()
    assert first_key.keyid == second_key.keyid  # made once, then reused
    envelope = sign_statement(STATEMENT, first_signer)
    assert _verifies(envelope, load_trust())
    assert not _verifies(envelope, [CryptoSigner.generate_ed25519().public_key])


@pytest.mark.parametrize("spec", ["ECC_NIST_P256", "RSA_2048"])
def test_aws_kms_signs_an_envelope_that_verifies_with_the_kms_public_key(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    moto_kms.install()
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        key_id = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec=spec)["KeyMetadata"]["KeyId"]
        monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", f"awskms:{key_id}")
        signer, public = load_signer()
        envelope = sign_statement(STATEMENT, signer)
    assert _verifies(envelope, [public])
    assert not _verifies(envelope, [CryptoSigner.generate_ed25519().public_key])


def test_an_unknown_kms_key_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        monkeypatch.setenv(
            "IMAGECTL_ATTESTATION_SIGNER", "awskms:1234abcd-0000-0000-0000-000000000000"
        )
        with pytest.raises(UserError, match="cannot load the attestation signer awskms:"):
            load_signer()


def test_an_unknown_signer_scheme_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", "vault:transit/keys/x")
    with pytest.raises(UserError, match="is not a signer this tool knows"):
        load_signer()


def test_the_kms_fake_refuses_a_digest_of_the_wrong_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake keeps KMS's rule for DIGEST messages (its length must match the hash)."""
    from botocore.exceptions import ClientError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    moto_kms.install()
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        key_id = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="ECC_NIST_P256")["KeyMetadata"]
        with pytest.raises(ClientError, match="ValidationException"):
            kms.sign(
                KeyId=key_id["KeyId"],
                Message=b"\x00" * 20,
                MessageType="DIGEST",
                SigningAlgorithm="ECDSA_SHA_256",
            )
