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
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner

from imagectl.core.errors import UserError
from imagectl.provenance.attest import sign_statement
from imagectl.provenance.keys import NoSigner, load_signer, load_trust, trust_path
from imagectl.provenance.statement import build_statement
from tests.fakes import moto_kms

REPO = Path(__file__).resolve().parents[2]

STATEMENT = build_statement(
    cloud="aws",
    region="us-east-1",
    cloud_image_id="ami-0123456789abcdef0",
    stack="h100-training",
    stack_digest="ab" * 32,
    manifest_sha256="cd" * 32,
    build_id="20261125-000000-abcdef",
    receipts=[{"verdict": "pass", "host": {"manifest_sha256": "ef" * 32}}],
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


def test_the_local_key_signs_and_verifies_with_its_trust_file() -> None:
    signer, key = load_signer()  # the state folder's key (tests/conftest.py makes it)
    _again, second = load_signer()
    assert key.keyid == second.keyid
    envelope = sign_statement(STATEMENT, signer)
    assert _verifies(envelope, load_trust())  # $IMAGECTL_ATTESTATION_TRUST names its file
    assert not _verifies(envelope, [CryptoSigner.generate_ed25519().public_key])


def test_no_signer_is_bad_input_and_nothing_makes_a_key(monkeypatch, tmp_path) -> None:
    """Without a signer or a local key, signing is refused (exit 2) and no key appears;
    without a trust file a verifier reads the repository's anchor, never a new key."""
    state = tmp_path / "empty-state"
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(state))
    with pytest.raises(NoSigner, match="imagectl attest --new-key"):
        load_signer()
    monkeypatch.delenv("IMAGECTL_ATTESTATION_TRUST")
    assert trust_path() == REPO / "keys" / "attestation-trust.json"
    with pytest.raises(UserError, match="lists no key"):
        load_trust()  # the pinned anchor lists no key yet: exit 2, not a key of its own
    assert not (state / "keys").exists()


def test_attest_new_key_is_the_command_that_creates_the_key(monkeypatch, tmp_path, cli) -> None:
    state = tmp_path / "fresh-state"
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(state))
    r = cli("attest", "--new-key")
    assert r.code == 0, r.err
    key = state / "keys" / "attestation.pem"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert json.loads(r.out)["keys"][0]["keyid"] == load_signer()[1].keyid
    again = cli("attest", "--new-key")
    assert again.out == r.out  # made once, then reused


def test_a_key_file_readable_by_others_is_refused(monkeypatch, tmp_path, cli) -> None:
    pem = tmp_path / "signer.pem"
    pem.write_bytes(CryptoSigner.generate_ed25519().private_bytes)
    pem.chmod(0o644)
    monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", f"file2:{pem}")
    with pytest.raises(UserError, match="readable or writable by others"):
        load_signer()
    r = cli("verify", "--export-trust")
    assert r.code == 2 and "mode 0644" in r.err
    pem.chmod(0o600)
    assert load_signer()[1].keyid


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "is empty"),
        ('{"keys": []}', "lists no key"),
        ("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n", "is not JSON"),
        ('{"signatures": []}', "is not a trust document"),
        ('{"keys": [{"keyid": "x", "keytype": "ed25519"}]}', "not a public key"),
    ],
)
def test_an_empty_or_foreign_trust_file_is_bad_input(tmp_path, cli, content, message) -> None:
    trust = tmp_path / "trust.json"
    trust.write_text(content)
    with pytest.raises(UserError, match=message):
        load_trust(trust)
    r = cli("verify", "ami-0123456789abcdef0", "--envelope", str(trust), "--trust", str(trust))
    assert r.code == 2 and message in " ".join(r.err.split()), r.err


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


def test_build_dry_run_makes_no_key_and_the_image_trusts_the_pinned_keys(
    monkeypatch, tmp_path, cli
) -> None:
    """`build --dry-run` once wrote a signing key; the image's trust is the repository's
    anchor (which lists no key yet: the image gets none, and writes no trust file)."""
    state = tmp_path / "dry-state"
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(state))
    monkeypatch.delenv("IMAGECTL_ATTESTATION_TRUST")
    out = tmp_path / "vars"
    r = cli("--root", str(REPO), "build", "--stack", "h100-training", "--cloud", "aws",
            "--dry-run", "--var-dir", str(out))  # fmt: skip
    assert r.code == 0, r.err
    assert not (state / "keys").exists()
    avars = json.loads((out / "h100-training.aws.ansible.json").read_text())
    assert avars["validator_attestation_trust"] == {}
    nonce = avars["manifest_nonce"]  # marked unsafe for Ansible (imagectl.packer.variables)
    assert len(nonce.get("__ansible_unsafe", nonce)) == 32 and avars["manifest_build_id"]
