"""A try-it receipt can never promote a real image: ``validate-image --sandbox`` is refused
where the cloud's SDK reaches a real endpoint, the gate refuses a sandbox receipt for an
image of a real cloud wherever the receipt was made, and no attestation signs for one.
"Emulated" is one test (``imagectl.clouds.account.real_cloud``, the preflight's): an
endpoint override whose host is this machine's loopback, as moto and the fakes listen."""

from __future__ import annotations

from typing import Any

import pytest

from imagectl.catalog import repository as repo
from imagectl.clouds.account import cloud_checks, emulator_endpoint, real_cloud
from imagectl.clouds.registry import cloud_names, remote_cloud_names
from imagectl.core.errors import UserError
from imagectl.promotion.gate import check_gate
from imagectl.provenance.attest import attest_image
from tests.support import flat, make_receipt

AMI = "ami-0123456789abcdef0"
REAL_LOOKING = ("https://ec2.us-east-1.amazonaws.com", "http://10.0.0.5:5000", "moto:5000")
EMULATED = ("http://127.0.0.1:5000", "http://localhost:8080/", "http://[::1]:9000")


def _no_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    for cloud in cloud_names():
        checks = cloud_checks(cloud)
        for name in checks.ENDPOINT_ENV if checks is not None else ():
            monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("cloud", remote_cloud_names())
def test_every_remote_cloud_is_real_unless_pointed_at_this_machine(cloud, monkeypatch) -> None:
    _no_endpoints(monkeypatch)
    assert real_cloud(cloud) and emulator_endpoint(cloud) is None
    name = cloud_checks(cloud).ENDPOINT_ENV[0]  # type: ignore[union-attr]
    for url in REAL_LOOKING:
        monkeypatch.setenv(name, url)
        assert real_cloud(cloud), url  # a FIPS/VPC endpoint or another host: a real account
    for url in EMULATED:
        monkeypatch.setenv(name, url)
        assert not real_cloud(cloud) and emulator_endpoint(cloud) == url


def test_the_local_cloud_has_no_account_so_it_is_not_a_real_endpoint() -> None:
    assert not real_cloud("local")


def _sandboxed_aws_image(world: Any) -> int:
    """An AWS image in the catalog, validated only by a sandbox replay receipt (as one
    made against an emulator elsewhere and recorded in this catalog would be)."""
    body = make_receipt(AMI, "h100-training", "ab" * 32, mode="replay", sandbox=True,
                        snapshot="tests/snapshots/healthy/h100-sxm-8x.json")  # fmt: skip
    with world.catalog.transaction() as s:
        build = repo.record_build(s, build_id="b-sandbox", stack="h100-training",
                                  stack_digest="ab" * 32, cloud="aws")  # fmt: skip
        row = repo.record_image(s, build=build, cloud_image_id=AMI, region="us-east-1")
        repo.set_state(s, row, "validating", reason="test")
        repo.record_receipt(s, row, shape="p5.48xlarge", host="i-1", receipt=body)
        repo.set_state(s, row, "validated", reason="test")
        return int(row.id)


def _gate(world: Any, pk: int) -> list[str]:
    with world.catalog.transaction() as s:
        img = repo.get_image(s, pk)
        return check_gate(s, img, stack_digest="ab" * 32, max_age_hours=24)


def test_the_gate_refuses_a_sandbox_receipt_for_a_real_cloud_image(world, monkeypatch) -> None:
    _no_endpoints(monkeypatch)
    pk = _sandboxed_aws_image(world)
    why = "is a sandbox replay (validate-image --sandbox)"
    reasons = _gate(world, pk)
    assert any(why in r and "aws is a real cloud endpoint here" in r for r in reasons), reasons
    monkeypatch.setenv("IMAGECTL_AWS_ENDPOINT_URL", REAL_LOOKING[0])
    assert any(why in r for r in _gate(world, pk))
    monkeypatch.setenv("IMAGECTL_AWS_ENDPOINT_URL", EMULATED[0])  # the sandbox's emulator
    assert not any(why in r for r in _gate(world, pk)), _gate(world, pk)


def test_no_attestation_signs_for_a_sandbox_receipt_on_a_real_cloud(
    world, monkeypatch, cli
) -> None:
    _no_endpoints(monkeypatch)
    assert cli("attest", "--new-key").code == 0  # a signer, so only the receipt can refuse
    pk = _sandboxed_aws_image(world)
    with pytest.raises(UserError) as info:
        attest_image(world.catalog, pk, None)
    assert "is not attested" in info.value.message and "sandbox replay" in info.value.message
    with world.catalog.transaction() as s:
        assert repo.latest_attestation(s, repo.get_image(s, pk)) is None


def test_validate_image_sandbox_is_refused_on_a_real_cloud(cli, monkeypatch) -> None:
    """Refused before any cloud call (no credentials, no endpoint here: a call would fail
    otherwise), naming the switch and the variable that points at an emulator."""
    _no_endpoints(monkeypatch)
    r = cli("validate-image", AMI, "--cloud", "aws", "--stack", "h100-training", "--sandbox")
    text = flat(r.err)
    assert r.code == 2, r.out + r.err
    assert "--sandbox marks the receipts as try-it replays" in text, text
    assert "$IMAGECTL_AWS_ENDPOINT_URL is unset" in text, text
