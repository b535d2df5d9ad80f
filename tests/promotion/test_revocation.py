"""Trust from signed data only: tags, revocations, offline verification, the build's
manifest.

The attestations are signed by the production path (``world.validated`` calls
``attest_image`` as the validation stage does); every attack is an edit an adversary
with catalog or tag access could make, and must make ``verify`` exit 1 and ``promote``
refuse. Offline verification runs with a catalog URL that cannot be opened, so any use
of a catalog would fail the command.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from sqlalchemy import text

from imagectl.provenance.attest import sign_statement
from imagectl.provenance.keys import load_signer, load_trust
from imagectl.provenance.statement import build_statement


def _env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


def _statement_of(world, image_pk: int) -> dict:
    with world.catalog.transaction() as s:
        (envelope,) = s.execute(
            text("SELECT envelope FROM attestations WHERE image_id = :i ORDER BY id DESC"),
            {"i": image_pk},
        ).first()
    envelope = json.loads(envelope) if isinstance(envelope, str) else envelope
    return json.loads(base64.b64decode(envelope["payload"]))


def test_a_source_image_tag_pointing_elsewhere_verifies_nothing(world, cli, monkeypatch) -> None:
    """The tag an adversary sets on a never-attested image names a validated one: verify
    judges only envelopes that name the image itself."""
    env = _env(world, monkeypatch)
    signed, unsigned = env.validated(), env.validated(attest=False)
    with env.catalog.transaction() as s:
        s.execute(
            text("UPDATE images SET tags = :t WHERE id = :i"),
            {"t": json.dumps({"imagectl:source-image": signed.id}), "i": unsigned.id},
        )
    r = cli("verify", str(unsigned.id), "--json")
    assert r.code == 1, r.out
    assert r.json()["reasons"] == [f"no attestation is recorded for {unsigned.label}"]


def test_the_manifest_subject_is_the_builds_fetched_copy_not_a_hosts_report(
    world, monkeypatch
) -> None:
    env = _env(world, monkeypatch)
    image = env.validated(attest=False)
    with env.catalog.transaction() as s:
        s.execute(
            text(
                "UPDATE builds SET manifest_sha256 = :d WHERE id = "
                "(SELECT build_pk FROM images WHERE id = :i)"
            ),
            {"d": "0f" * 32, "i": image.id},
        )
    from imagectl.provenance.attest import attest_image

    attest_image(env.catalog, image.id)
    statement = _statement_of(env, image.id)
    names = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert names["manifest:/etc/imagectl/manifest.json"] == "0f" * 32
    receipt_manifest = statement["predicate"]["receipts"][0].get("host", {}).get("manifest_sha256")
    assert receipt_manifest != "0f" * 32  # what the host said does not count
    assert statement["predicate"]["image"]["build_id"].startswith("b-")


def test_promotion_signs_the_copies_and_a_copy_verifies_offline(
    world, cli, monkeypatch, tmp_path: Path
) -> None:
    env = _env(world, monkeypatch)
    image = env.validated()
    assert cli("promote", str(image.id), "--stack", "local").code == 0
    statement = _statement_of(env, image.id)
    subjects = {s["name"] for s in statement["subject"] if s["name"].startswith("image:")}
    assert subjects == {f"image:local/{r}/{image.cloud_image_id}"
                        for r in ("build", "local-a", "local-b", "local-c")}  # fmt: skip
    exported = cli("verify", str(image.id), "--export-envelope")
    assert exported.code == 0, exported.err
    envelope = tmp_path / "attestation.dsse.json"
    envelope.write_text(exported.out)
    trust = tmp_path / "trust.json"
    trust.write_text(Path(env.env()["IMAGECTL_ATTESTATION_TRUST"]).read_text())
    # no catalog: a URL that cannot be opened
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    r = cli("verify", image.cloud_image_id, "--envelope", str(envelope), "--trust", str(trust),
            "--json")  # fmt: skip
    assert r.code == 0, r.out + r.err
    assert r.json()["valid"] is True
    other = cli("verify", "sha256:" + "0" * 64, "--envelope", str(envelope), "--trust", str(trust))
    assert other.code == 1 and "not sha256:000" in other.out


def test_a_self_contradicting_statement_does_not_verify_offline(tmp_path: Path, cli) -> None:
    """Signed by the trusted key, verdict pass, but one of its receipts failed."""
    signer, _public = load_signer()
    statement = build_statement(
        cloud="aws", region="us-east-1", cloud_image_id="ami-0123456789abcdef0",
        stack="h100-training", stack_digest="ab" * 32, manifest_sha256="cd" * 32,
        build_id="b-1", verdict="pass", attested_by="mallory", attested_at="2026-11-26",
        receipts=[{"verdict": "pass", "image_id": "ami-0123456789abcdef0"},
                  {"verdict": "fail", "worst_action": "BLOCK_IMAGE",
                   "image_id": "ami-0123456789abcdef0"}],
    )  # fmt: skip
    envelope = tmp_path / "env.json"
    envelope.write_text(json.dumps(sign_statement(statement, signer)))
    r = cli("verify", "ami-0123456789abcdef0", "--envelope", str(envelope), "--json")
    assert r.code == 1
    reasons = " ".join(r.json()["reasons"])
    assert "receipt 1 says 'fail', yet the statement says pass" in reasons
    assert "asks to BLOCK_IMAGE" in reasons


def test_a_revoked_image_is_refused_everywhere(world, cli, monkeypatch, tmp_path: Path) -> None:
    env = _env(world, monkeypatch)
    first, second = env.validated(), env.validated()
    assert cli("promote", str(first.id), "--stack", "local").code == 0
    assert cli("promote", str(second.id), "--stack", "local").code == 0
    envelope = tmp_path / "second.dsse.json"
    envelope.write_text(cli("verify", str(second.id), "--export-envelope").out)

    r = cli("revoke", str(second.id), "--reason", "NCCL hangs at 256 GPUs", "--json")
    assert r.code == 0, r.err
    body = r.json()
    assert body["revocation"].startswith("sha256-") and body["rolled_back"]
    # rolled back first: every pointer names the first image again
    status = cli("status", "--stack", "local", "--json")
    (entry,) = status.json()["stacks"]
    assert {c["image"]["cloud_image_id"] for c in entry["current"]} == {first.cloud_image_id}
    assert "revoked" in cli("status", "--stack", "local").out
    # the catalog's verify, its envelope export, and promote (even forced) refuse it
    v = cli("verify", str(second.id), "--json")
    assert v.code == 1 and v.json()["revoked"] is True
    assert "NCCL hangs at 256 GPUs" in " ".join(v.json()["reasons"])
    export = cli("verify", str(second.id), "--export-envelope")
    assert export.code == 1 and '"payload"' not in export.out  # no envelope handed out
    p = cli("promote", str(second.id), "--stack", "local", "--force", "--reason", "need it")
    assert p.code == 1 and "revoked" in p.err
    # the tag and the file beside the catalog
    meta = env.provider().get_image(second.cloud_image_id, "build")
    assert meta is not None and meta.tags["imagectl:revoked"] == body["revocation"]
    state = Path(env.env()["IMAGECTL_STATE_DIR"])
    assert (state / "attestations" / f"{body['revocation']}.revoked.json").is_file()
    # deploy jobs: the exported revocations make the offline check refuse it too
    revocations = tmp_path / "revocations.json"
    revocations.write_text(cli("verify", "--export-revocations").out)
    published = json.loads(base64.b64decode(json.loads(revocations.read_text())["payload"]))
    assert len(published["revocations"]) == 1 and published["version"] >= 1
    trust = env.env()["IMAGECTL_ATTESTATION_TRUST"]
    ok = cli("verify", second.cloud_image_id, "--envelope", str(envelope), "--trust", trust)
    assert ok.code == 0  # without the revocations the envelope alone still holds
    off = cli("verify", second.cloud_image_id, "--envelope", str(envelope), "--trust", trust,
              "--revocations", str(revocations))  # fmt: skip
    assert off.code == 1 and "revoked" in off.out


def test_block_of_a_promoted_image_revokes_it(world, cli, monkeypatch) -> None:
    env = _env(world, monkeypatch)
    first, second = env.validated(), env.validated()
    assert cli("promote", str(first.id), "--stack", "local").code == 0
    assert cli("promote", str(second.id), "--stack", "local").code == 0
    r = cli("block", str(second.id), "--reason", "recall")
    assert r.code == 0, r.err
    v = cli("verify", str(second.id), "--json")
    assert v.code == 1 and v.json()["revoked"] is True
    with env.catalog.transaction() as s:
        states = {row[0] for row in s.execute(
            text("SELECT state FROM images WHERE cloud_image_id = :c"),
            {"c": second.cloud_image_id})}  # fmt: skip
    assert states == {"blocked"}


def _revoked_then_erased_from_the_catalog(env, cli):
    """A promoted image revoked, then every trace of it erased from the catalog (its
    revocation row, its tag, its blocked state): what an adversary with catalog access
    would do to promote a recalled image again."""
    first, second = env.validated(), env.validated()
    assert cli("promote", str(first.id), "--stack", "local").code == 0
    assert cli("promote", str(second.id), "--stack", "local").code == 0
    assert cli("revoke", str(second.id), "--reason", "recalled: bad NCCL").code == 0
    with env.catalog.transaction() as s:
        s.execute(text("DELETE FROM revocations"))
        s.execute(text("UPDATE images SET tags = '{}', state = 'validated', "
                       "blocked_reason = NULL WHERE id = :i"), {"i": second.id})  # fmt: skip
    return second


def test_no_single_store_can_un_revoke(world, cli, monkeypatch) -> None:
    """The catalog erased: the published list and the cloud's tag still refuse it, in
    verify and in promote (even forced); with the tag gone too, the list alone does."""
    env = _env(world, monkeypatch)
    second = _revoked_then_erased_from_the_catalog(env, cli)
    v = cli("verify", str(second.id), "--json")
    assert v.code == 1 and v.json()["revoked"] is True
    reasons = " ".join(v.json()["reasons"])
    assert "published revocation list" in reasons and "cloud's imagectl:revoked tag" in reasons
    assert "not signed by" not in reasons  # refused for the revocation, not the signature
    p = cli("promote", str(second.id), "--stack", "local", "--force", "--reason", "need it")
    assert p.code == 1 and "revoked" in p.err and "recalled: bad NCCL" in " ".join(p.err.split())
    # the cloud's tag removed as well: the signed list alone still refuses it
    provider = env.provider()
    for region in ("build", "local-a", "local-b", "local-c"):
        image = provider.get_image(second.cloud_image_id, region)
        if image is not None:
            provider.set_tags(image, {"imagectl:revoked": ""})
    p = cli("promote", str(second.id), "--stack", "local", "--force", "--reason", "need it")
    assert p.code == 1 and "published revocation list" in " ".join(p.err.split()), p.err


def test_the_published_list_cannot_be_rolled_back_frozen_or_dropped(
    world, cli, monkeypatch, tmp_path: Path
) -> None:
    """An older genuine list (from before the revocation), an expired one, and no list
    where one was seen: each refused by verify and promote."""
    env = _env(world, monkeypatch)
    state = Path(env.env()["IMAGECTL_STATE_DIR"])
    published = state / "attestations" / "revocations.json"
    first = env.validated()
    assert cli("promote", str(first.id), "--stack", "local").code == 0
    assert cli("verify", "--export-revocations").code == 0  # version N: no revocation yet
    older = published.read_bytes()
    second = _revoked_then_erased_from_the_catalog(env, cli)  # version N+1 names it
    provider = env.provider()
    for region in ("build", "local-a", "local-b", "local-c"):
        image = provider.get_image(second.cloud_image_id, region)
        if image is not None:
            provider.set_tags(image, {"imagectl:revoked": ""})
    published.write_bytes(older)  # rollback to the list from before the revocation
    v = cli("verify", str(second.id), "--json")
    assert v.code == 1 and "rollback" in " ".join(v.json()["reasons"])
    p = cli("promote", str(second.id), "--stack", "local", "--force", "--reason", "x")
    assert p.code == 1 and "rollback" in p.err
    # a fresh list that has expired (freeze)
    assert cli("verify", "--export-revocations", "--valid-hours", "0.01").code == 0
    import datetime as dt

    body = json.loads(base64.b64decode(json.loads(published.read_text())["payload"]))
    assert dt.datetime.fromisoformat(body["expires"]) > dt.datetime.now(dt.timezone.utc)
    from imagectl.provenance import revocations

    found, refused = revocations.published(
        load_trust(), now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    )
    assert found is None and "expired" in " ".join(refused) and "freeze" in " ".join(refused)
    # the list deleted where one was seen: gone is not "nothing revoked"
    published.unlink()
    v = cli("verify", str(second.id), "--json")
    assert v.code == 1 and "is missing" in " ".join(v.json()["reasons"])


def test_each_clouds_revoked_tag_and_the_list_outlive_the_catalog(
    cloud, world, monkeypatch
) -> None:
    """On each cloud's emulator: revoked, then erased from the catalog; promote (even
    forced) is refused by the cloud's imagectl:revoked tag and the published list, and by
    the list alone once the tag is gone too."""
    import pytest

    from imagectl.promotion.gate import ImageBlocked
    from imagectl.promotion.promote import promote
    from imagectl.promotion.revoke import revoke_image

    _env(world, monkeypatch)
    row = cloud.seed()
    provider = cloud.provider()
    revoke_image(cloud.catalog, provider, row.id, reason="recalled: bad NCCL")
    with cloud.catalog.transaction() as s:
        s.execute(text("DELETE FROM revocations"))
        s.execute(text("UPDATE images SET tags = '{}', state = 'validated', "
                       "blocked_reason = NULL WHERE id = :i"), {"i": row.id})  # fmt: skip
    with pytest.raises(ImageBlocked) as refused:
        promote(cloud.catalog, provider, cloud.resolved, row.id, poll_s=0.01, force=True,
                reason="need it")  # fmt: skip
    why = " ".join(refused.value.reasons)
    assert "imagectl:revoked tag" in why and "published revocation list" in why, why
    image = provider.get_image(row.cloud_image_id, row.region)
    provider.set_tags(image, {"imagectl:revoked": ""})
    with pytest.raises(ImageBlocked) as refused:
        promote(cloud.catalog, provider, cloud.resolved, row.id, poll_s=0.01, force=True,
                reason="need it")  # fmt: skip
    why = " ".join(refused.value.reasons)
    assert "tag" not in why and "recalled: bad NCCL" in why, why


def test_a_corrupt_published_list_is_refused_and_replaced(world, cli, monkeypatch) -> None:
    """The list beside the catalog nested 100,000 deep: verify refuses (one paragraph,
    no traceback); a fresh export replaces it and verify holds again."""
    env = _env(world, monkeypatch)
    image = env.validated()
    assert cli("verify", "--export-revocations").code == 0
    published = Path(env.env()["IMAGECTL_STATE_DIR"]) / "attestations" / "revocations.json"
    published.write_text("[" * 100_000 + "]" * 100_000)
    r = cli("verify", str(image.id), "--json")
    assert r.code == 1 and "nested" in " ".join(r.json()["reasons"]), r.out + r.err
    assert cli("verify", "--export-revocations").code == 0
    again = cli("verify", str(image.id))
    assert again.code == 0, again.out + again.err
