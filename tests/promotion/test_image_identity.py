"""An attestation names exactly one image: the cloud's full identity, signed and compared
whole (``imagectl.validators.identity``).

The identities are the ones each cloud documents (trust-and-revocation reference): AWS
pairs a regional AMI id with its region and owning account (DescribeImages
``OwnerId``); Google Cloud names ``projects/P/global/images/NAME`` and a numeric id (a
name exists in many projects, and a new image can take a deleted one's name); Azure
names a gallery image version by its full resource id (a version number is unique only
within its definition). Each attack is the same name elsewhere: the statement is
genuine, the image it is held against is not the one it names.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from imagectl.validators.identity import ImageRef, first_mismatch, mismatch, parse

SUB = "00000000-0000-0000-0000-000000000000"


def _azure(
    definition: str = "h100-training",
    version: str = "2026.1122042530.11259375",
    gallery: str = "imagectl_gallery",
    sub: str = SUB,
    rg: str = "imagectl-images",
) -> str:
    return (
        f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/galleries/"
        f"{gallery}/images/{definition}/versions/{version}"
    )


AWS = ImageRef("aws", "ami-0123456789abcdef0", "us-east-1", "111122223333")
GCP = ImageRef("gcp", "h100-training-20261122", None, "prod-images", "4471934671284321")
AZURE = parse("azure", _azure())


@pytest.mark.parametrize(
    "signed, observed, cloud",
    [
        (AWS, "ami-0123456789abcdef0", "aws"),
        (AWS, "us-east-1/ami-0123456789abcdef0", "aws"),
        (AWS, "us-east-1/111122223333/ami-0123456789abcdef0", "aws"),
        (AWS, "arn:aws:ec2:us-east-1:111122223333:image/ami-0123456789abcdef0", "aws"),
        (GCP, "projects/prod-images/global/images/h100-training-20261122", "gcp"),
        (
            GCP,
            "https://www.googleapis.com/compute/v1/projects/prod-images/global/images/"
            "h100-training-20261122",
            "gcp",
        ),
        (GCP, "projects/prod-images/global/images/4471934671284321", "gcp"),  # selfLinkWithId
        (AZURE, _azure(), "azure"),
        (AZURE, _azure().upper().replace("VERSIONS", "versions"), "azure"),  # ARM ids: any case
    ],
)
def test_the_image_itself_matches(signed: ImageRef, observed: str, cloud: str) -> None:
    assert mismatch(signed, parse(cloud, observed)) is None
    # and through the statement's subject form
    assert first_mismatch([f"image:{signed.text()}"], parse(cloud, observed)) is None


@pytest.mark.parametrize(
    "signed, observed, cloud, why",
    [
        # AWS: the same AMI id in another region, or owned by another account
        (AWS, "us-west-2/ami-0123456789abcdef0", "aws", "another region"),
        (AWS, "us-east-1/444455556666/ami-0123456789abcdef0", "aws", "another account"),
        (
            AWS,
            "arn:aws:ec2:us-east-1:444455556666:image/ami-0123456789abcdef0",
            "aws",
            "another account",
        ),
        # Google Cloud: the same name in another project; a new image under the same name
        (
            GCP,
            "projects/attacker/global/images/h100-training-20261122",
            "gcp",
            "another project",
        ),
        (
            GCP,
            "projects/prod-images/global/images/h100-training-20261122@999",
            "gcp",
            "another numeric image id",
        ),
        (GCP, "projects/prod-images/global/images/999", "gcp", "another numeric image id"),
        (GCP, "h100-training-20261122", "gcp", "names no project"),
        # Azure: the same version number of another definition, gallery, group, subscription
        (AZURE, _azure(definition="h100-debug"), "azure", "another gallery image definition"),
        (AZURE, _azure(gallery="other"), "azure", "another gallery image definition"),
        (AZURE, _azure(rg="attacker-rg"), "azure", "another gallery image definition"),
        (
            AZURE,
            _azure(sub="11111111-1111-1111-1111-111111111111"),
            "azure",
            "another gallery image definition",
        ),
        (AZURE, _azure(version="2026.1122042530.1"), "azure", "another version"),
        (AZURE, "2026.1122042530.11259375", "azure", "names no gallery image definition"),
        # the local cloud: another content address; and another cloud altogether
        (
            ImageRef("local", "sha256:" + "a" * 64, "build"),
            "sha256:" + "b" * 64,
            "local",
            "another image id",
        ),
        (AWS, "projects/prod-images/global/images/h100-training-20261122", "gcp", "on aws"),
    ],
)
def test_the_same_name_elsewhere_does_not(
    signed: ImageRef, observed: str, cloud: str, why: str
) -> None:
    reason = mismatch(signed, parse(cloud, observed))
    assert reason is not None and why in reason, reason


def test_a_statement_signed_before_the_account_was_named_fails_closed() -> None:
    """A subject without the account cannot be held against a reference that names one."""
    old = "image:aws/us-east-1/ami-0123456789abcdef0"
    seen = parse("aws", "us-east-1/111122223333/ami-0123456789abcdef0")
    reason = first_mismatch([old], seen)
    assert reason is not None and "does not name the account" in reason


def _env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)


def test_each_cloud_signs_the_full_identity_and_offline_verify_compares_it(
    cloud, world, cli, monkeypatch, tmp_path: Path
) -> None:
    """The validation stage's signing names the cloud's full identity; offline verify of
    the image reached through a pointer moved to the same name elsewhere exits 1 naming
    what differs, and the image itself verifies (exit 0)."""
    _env(world, monkeypatch)
    row = cloud.seed()
    from imagectl.catalog import repository as repo

    with world.catalog.transaction() as s:  # the envelope the deploy job ships
        signed = dict(repo.latest_attestation(s, repo.image_row(s, row.id)).envelope)
    envelope = tmp_path / "attestation.dsse.json"
    envelope.write_text(json.dumps(signed))
    statement = json.loads(base64.b64decode(signed["payload"]))
    (subject,) = [s["name"] for s in statement["subject"] if s["name"].startswith("image:")]
    trust = world.env()["IMAGECTL_ATTESTATION_TRUST"]
    if cloud.cloud == "aws":
        account = "123456789012"  # moto's default OwnerId
        assert subject == f"image:aws/us-east-1/{account}/{row.cloud_image_id}"
        good = f"arn:aws:ec2:us-east-1:{account}:image/{row.cloud_image_id}"
        moved = f"us-east-1/444455556666/{row.cloud_image_id}"
        why = "another account"
    elif cloud.cloud == "gcp":
        raw = cloud.provider()._get_raw(row.cloud_image_id)
        assert subject == (
            f"image:gcp/projects/imagectl-test/global/images/{row.cloud_image_id}@{raw.id}"
        )
        good = f"projects/imagectl-test/global/images/{row.cloud_image_id}"
        moved = f"projects/attacker-project/global/images/{row.cloud_image_id}"
        why = "another project"
    else:
        assert subject == f"image:azure/{row.cloud_image_id}"
        good = row.cloud_image_id
        moved = row.cloud_image_id.replace("/images/h100-training/", "/images/h100-debug/")
        why = "another gallery image definition"
    ok = cli(
        "verify",
        good,
        "--envelope",
        str(envelope),
        "--trust",
        trust,
        "--cloud",
        cloud.cloud,
        "--stack",
        "h100-training",
    )
    assert ok.code == 0, ok.out + ok.err
    bad = cli("verify", moved, "--envelope", str(envelope), "--trust", trust, "--json")
    assert bad.code == 1, bad.out + bad.err
    reasons = " ".join(bad.json()["reasons"])
    assert why in reasons and "not signed" not in reasons, reasons
    # the scoping flags: another stack, another cloud
    other_stack = cli(
        "verify",
        good,
        "--envelope",
        str(envelope),
        "--trust",
        trust,
        "--stack",
        "h100-debug",
        "--json",
    )
    assert other_stack.code == 1
    assert "not h100-debug" in " ".join(other_stack.json()["reasons"])
    other_cloud = "gcp" if cloud.cloud != "gcp" else "aws"
    wrong = cli(
        "verify", good, "--envelope", str(envelope), "--trust", trust, "--cloud", other_cloud
    )
    assert wrong.code == 1


def test_online_verify_honours_its_scoping_flags(world, cli, monkeypatch) -> None:
    """The catalog's verify: an image of another stack or cloud than asked is refused."""
    _env(world, monkeypatch)
    image = world.validated()
    assert cli("verify", str(image.id), "--stack", "local", "--cloud", "local").code == 0
    other = cli("verify", str(image.id), "--stack", "h100-training")
    assert other.code == 2 and "belongs to stack local, not h100-training" in other.err
    elsewhere = cli("verify", image.cloud_image_id, "--cloud", "aws")
    assert elsewhere.code == 2 and "unknown image" in elsewhere.err
