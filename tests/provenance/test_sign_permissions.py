"""The attestation signer's KMS calls under exactly the shipped sign document
(images/permissions/aws/sign.json), enforced by moto's IAM (tests/fakes/permissions.py).

The build workflow's job validates and signs with one identity (images/permissions/README.md:
validate and sign): ``validate-image`` with ``$IMAGECTL_ATTESTATION_SIGNER=awskms:KEY``
decides ``validated`` and signs through securesystemslib's AWSSigner (KMS GetPublicKey, then
Sign with a digest: "AWS KMS API Reference", GetPublicKey and Sign). Under the validate and
sign documents the run is validated and attested, and every entry of the sign document is
used; ``imagectl attest`` (signing again) under the sign document less one permission fails
naming it. Google Cloud KMS and Azure Key Vault have no emulator here (and their SDKs are
the optional ``kms`` extra), so gcp/sign.yaml and azure/sign.json are not run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clouds.scenario import HEALTHY, write_override
from tests.fakes import moto_kms
from tests.fakes import permissions as perm
from tests.fakes.fixtures import CloudEnv

RUNNER = "203.0.113.7/32"


def _with(*docs: Any) -> dict[str, Any]:
    """One identity holding every document (as the workflow's job does)."""
    return {"Version": "2012-10-17", "Statement": [s for d in docs for s in d["Statement"]]}


@pytest.fixture
def kms_key(aws_moto: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """An asymmetric signing key, made by its administrator (not the run's identity)."""
    import boto3

    moto_kms.install()
    kms = boto3.client("kms", region_name="us-east-1")
    key = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="ECC_NIST_P256")["KeyMetadata"]
    monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", f"awskms:{key['KeyId']}")
    return str(key["KeyId"])


def test_the_kms_signer_under_exactly_the_sign_document(
    cli: Any, aws_moto: Any, kms_key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = CloudEnv("aws", aws_moto)
    image = env.seed_candidate()
    validate, sign = perm.load_document("aws", "validate"), perm.load_document("aws", "sign")
    override = write_override(tmp_path, [HEALTHY])
    with perm.enforced("aws", None, monkeypatch, _with(validate, sign)) as enforcer:
        result = cli("validate-image", image.image_id, "--cloud", "aws", "--stack",
                     "h100-training", "--inventory-override", str(override), "--reach-timeout",
                     "2", "--hosts", "1", "--runner-cidr", RUNNER, "--json")  # fmt: skip
    assert result.code == 0, result.out[-2000:] + result.err[-2000:]
    data = result.json()
    assert data["state"] == "validated" and data["attestation"], data
    assert enforcer.refused == [], enforcer.refused
    assert {"kms:GetPublicKey", "kms:Sign"} <= enforcer.used
    assert perm.unused("aws", sign, enforcer) == []

    # signing again (`imagectl attest`), each permission of the sign document missing once
    for permission in perm.granted("aws", sign):
        doc = _with(validate, perm.without("aws", sign, permission))
        with perm.enforced("aws", None, monkeypatch, doc) as refused:
            again = cli("attest", image.image_id, "--cloud", "aws", "--stack", "h100-training")
        assert permission in refused.refused, (permission, refused.refused)
        denied = f"not authorized to perform: {permission}"  # AWS's message, not our hint
        assert again.code != 0 and denied in " ".join(again.err.split()), again.err[-2000:]
