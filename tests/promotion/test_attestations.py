"""Signed validation attestations: ``imagectl verify`` and the promotion gate.

Each way an attestation can fail to hold, from the DSSE and in-toto specs
(https://github.com/secure-systems-lab/dsse/blob/master/protocol.md: a signature covers
exactly the payload type and bytes; https://github.com/in-toto/attestation/blob/main/
spec/v1/statement.md: a statement is about its subjects only), is made here by an
adversary's edit of the catalog or the key, and must make ``verify`` exit 1 and
``promote`` refuse. The attestations themselves are signed by the production path
(``world.validated`` calls ``attest_image`` as the validation stage does).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from sqlalchemy import text

from imagectl.provenance.attest import attest_image, envelope_digest

REGIONS = ["local-a", "local-b", "local-c"]


@pytest.fixture
def env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


def _sql(world, statement: str, **params) -> None:
    with world.catalog.transaction() as s:
        s.execute(text(statement), params)


def _envelope(world, image_pk: int) -> dict:
    with world.catalog.transaction() as s:
        row = s.execute(
            text("SELECT envelope FROM attestations WHERE image_id = :i ORDER BY id DESC"),
            {"i": image_pk},
        ).first()
    envelope = row[0]
    return json.loads(envelope) if isinstance(envelope, str) else envelope


def _store_envelope(world, image_pk: int, envelope: dict) -> None:
    """An adversary with write access to the catalog replaces the stored envelope (and
    its digest, so only the signature can tell)."""
    _sql(
        world,
        "UPDATE attestations SET envelope = :e, digest = :d WHERE image_id = :i",
        e=json.dumps(envelope),
        d=envelope_digest(envelope),
        i=image_pk,
    )


def _refused(cli, image) -> str:
    r = cli("promote", str(image.id), "--stack", "local")
    assert r.code == 1, (r.out, r.err)
    assert "refused" in r.err and "attestation" in r.err
    return r.err


def test_a_validated_image_verifies_and_promotes_and_its_copies_verify(env, cli) -> None:
    image = env.validated()
    r = cli("verify", str(image.id), "--json")
    assert r.code == 0, r.out + r.err
    body = r.json()
    assert body["valid"] and body["digest"].startswith("sha256-")
    # the image carries the digest as its tag, and the envelope lies beside the catalog
    meta = env.provider().get_image(image.cloud_image_id, "build")
    assert meta is not None and meta.tags["imagectl:attestation"] == body["digest"]
    assert (Path(os.environ["IMAGECTL_STATE_DIR"]) / "attestations").glob(body["digest"] + "*")
    assert cli("promote", str(image.id), "--stack", "local").code == 0
    with env.catalog.transaction() as s:
        copies = s.execute(
            text("SELECT id FROM images WHERE id != :i AND region IN ('local-a')"),
            {"i": image.id},
        ).all()
    (copy_id,) = copies[0]
    r = cli("verify", str(copy_id), "--json")  # a copy is judged by its source's attestation
    assert r.code == 0 and r.json()["attested_image"].startswith(image.cloud_image_id)


def test_a_receipt_changed_after_signing_fails(env, cli) -> None:
    image = env.validated()
    with env.catalog.transaction() as s:
        run_id, body = s.execute(
            text("SELECT id, receipt FROM validation_runs WHERE image_id = :i"), {"i": image.id}
        ).one()
    receipt = json.loads(body) if isinstance(body, str) else dict(body)
    receipt["profile"] = "full"  # a stronger profile than the one that ran
    _sql(env, "UPDATE validation_runs SET receipt = :r WHERE id = :i", r=json.dumps(receipt),
         i=run_id)  # fmt: skip
    r = cli("verify", str(image.id))
    assert r.code == 1 and "not the one signed" in r.out
    _refused(cli, image)


def test_a_tampered_signed_receipt_fails_the_signature(env, cli) -> None:
    image = env.validated()
    envelope = _envelope(env, image.id)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["receipts"][0]["worst_action"] = "NONE"
    statement["predicate"]["receipts"][0]["verdict"] = "pass"
    statement["predicate"]["receipts"][0]["profile"] = "burn"  # the edit: a stronger claim
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    _store_envelope(env, image.id, envelope)
    r = cli("verify", str(image.id))
    assert r.code == 1 and "not signed by a trusted key" in r.out
    _refused(cli, image)


def test_a_signature_by_another_key_fails(env, cli, tmp_path, monkeypatch) -> None:
    from securesystemslib.signer import CryptoSigner

    image = env.validated(attest=False)
    other = tmp_path / "other.pem"
    other.write_bytes(CryptoSigner.generate_ed25519().private_bytes)
    other.chmod(0o600)
    monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", f"file2:{other}")
    attest_image(env.catalog, image.id)
    monkeypatch.delenv("IMAGECTL_ATTESTATION_SIGNER")  # verifiers trust the named trust file
    r = cli("verify", str(image.id))
    assert r.code == 1 and "not signed by a trusted key" in r.out
    _refused(cli, image)
    # a verifier that trusts the other key (its exported trust file) accepts it
    monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", f"file2:{other}")
    trust = cli("verify", "--export-trust")
    assert trust.code == 0
    (tmp_path / "trust.json").write_text(trust.out)
    monkeypatch.delenv("IMAGECTL_ATTESTATION_SIGNER")
    assert cli("verify", str(image.id), "--trust", str(tmp_path / "trust.json")).code == 0


def test_an_attestation_of_another_image_fails(env, cli) -> None:
    signed, unsigned = env.validated(), env.validated(attest=False)
    _sql(
        env,
        "INSERT INTO attestations (image_id, digest, keyid, envelope, created_at) "
        "SELECT :other, digest || '-copy', keyid, envelope, created_at FROM attestations "
        "WHERE image_id = :signed",
        other=unsigned.id,
        signed=signed.id,
    )
    r = cli("verify", str(unsigned.id))
    assert r.code == 1 and f"attests image:local/build/{signed.cloud_image_id}" in r.out
    _refused(cli, unsigned)


def test_a_missing_attestation_fails_and_force_overrides_with_a_record(env, cli) -> None:
    image = env.validated(attest=False)
    r = cli("verify", str(image.id), "--json")
    assert r.code == 1 and r.json()["reasons"] == [f"no attestation is recorded for {image.label}"]
    _refused(cli, image)
    r = cli("promote", str(image.id), "--stack", "local", "--force", "--reason", "KMS outage")
    assert r.code == 0, r.err
    (forced,) = env.events("promotion.forced")
    assert forced.details["reason"] == "KMS outage"
    assert any("no attestation" in why for why in forced.details["overridden"])


def test_a_corrupt_envelope_is_bad_input(env, cli) -> None:
    image = env.validated()
    _store_envelope(env, image.id, {"payloadType": "application/vnd.in-toto+json"})
    r = cli("verify", str(image.id))
    assert r.code == 2 and "is not a DSSE envelope" in r.err
