"""Base image drift: ``imagectl drift --base-images`` reports a newer
base image than the stack builds on as a finding with the proposed pin.

AWS through moto (DescribeImages with the stack's owner and name filter): the promoted
image's build recorded the October AMI; Canonical then publishes a November one. The
expected report, from the EC2 semantics: ``base-image-newer`` with current = the October
id, available = the November id, and the pin ``clouds.aws.base_image.id: <November id>``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3
import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from tests.fakes.fixtures import resolved_stack

pytest_plugins = ["tests.fakes.fixtures"]


@pytest.fixture(autouse=True)
def _no_real_gcp_or_azure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Google Cloud and Azure point at a closed port: nothing leaves this machine."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("IMAGECTL_GCP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{port}")


def _ami(faults: Any, name: str, owner: str, created: dt.datetime) -> str:
    region = resolved_stack().stack.clouds.aws.build.region
    ec2 = boto3.client("ec2", region_name=region)
    image_id = str(
        ec2.register_image(
            Name=name, Architecture="x86_64", RootDeviceName="/dev/sda1", VirtualizationType="hvm"
        )["ImageId"]
    )
    record = faults.backend(region).amis[image_id]
    record.owner_id, record.creation_date = owner, created
    return image_id


def _promoted_on(base_id: str) -> None:
    """A promoted h100-training AMI whose build recorded ``base_id``."""
    resolved = resolved_stack()
    catalog = open_catalog()
    with catalog.transaction() as s:
        build = repo.record_build(
            s, build_id="b-base", stack=resolved.name, stack_digest=resolved.digest,
            cloud="aws", base_image={"cloud": "aws", "id": base_id},
        )  # fmt: skip
        row = repo.record_image(s, build=build, cloud_image_id="ami-0c0ffee0c0ffee000",
                                region="us-east-1")  # fmt: skip
        for state in ("validating", "validated", "promoting", "promoted"):
            repo.set_state(s, row, state, reason="test")


def _report(cli: Any) -> dict[str, Any]:
    r = cli("drift", "--stack", "h100-training", "--base-images", "--json")
    body: dict[str, Any] = r.json()
    body["code"] = r.code
    return body


def _aws(body: dict[str, Any]) -> list[dict[str, Any]]:
    (stack,) = body["stacks"]
    return [f for f in stack["findings"] if f["cloud"] == "aws"]


def test_a_newer_base_image_is_drift_with_the_proposed_pin(aws_moto: Any, cli: Any) -> None:
    aws = resolved_stack().stack.clouds.aws
    stem, owner = aws.base_image.name.replace("*", ""), aws.base_image.owner
    utc = dt.timezone.utc
    october = _ami(aws_moto, stem + "20261001", owner, dt.datetime(2026, 10, 1, tzinfo=utc))
    _promoted_on(october)
    body = _report(cli)
    assert [f["kind"] for f in _aws(body)] == []  # built on the newest: nothing to report

    november = _ami(aws_moto, stem + "20261101", owner, dt.datetime(2026, 11, 1, tzinfo=utc))
    body = _report(cli)
    (finding,) = _aws(body)
    assert (finding["kind"], finding["current"], finding["available"]) == (
        "base-image-newer", october, november
    )  # fmt: skip
    assert finding["extra"]["proposed_pin"] == {"pin": "clouds.aws.base_image.id",
                                                "proposed": november}  # fmt: skip
    assert f"clouds.aws.base_image.id: {november}" in finding["detail"]
    assert body["drift"] is True and body["code"] == 1
    # the clouds without an emulator here are errors of this check, not an abort
    (stack,) = body["stacks"]
    assert {e["cloud"] for e in stack["errors"]} >= {"gcp", "azure"}
    assert stack["checks"]["base-images"]["status"] == "error"


def test_no_build_yet_is_information_not_drift(aws_moto: Any, cli: Any) -> None:
    aws = resolved_stack().stack.clouds.aws
    stem, owner = aws.base_image.name.replace("*", ""), aws.base_image.owner
    ami = _ami(aws_moto, stem + "1", owner, dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc))
    (finding,) = _aws(_report(cli))
    assert (finding["kind"], finding["severity"], finding["available"]) == (
        "base-image-unrecorded", "info", ami
    )  # fmt: skip
