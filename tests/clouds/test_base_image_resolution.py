"""Known ancestry: each cloud's answer to a stack's base image query, from its emulator.

What each API answers (written from its reference before running the code):

- EC2 DescribeImages with the owner and the name filter: among available HVM images with
  an EBS root of the stack's architecture, the newest ``CreationDate`` (Packer's
  ``most_recent``); another owner's image of the same name, an arm64 one or one in
  another region is never it;
- Compute Engine images.getFromFamily: the family's newest image that is not deprecated,
  in the project asked (another project's image in a family of the same name is not);
- ARM Virtual Machine Images - List: every version of publisher/offer/SKU in the
  location; the newest is the highest Major.Minor.Build compared as numbers;
- nothing matching: one paragraph naming the query and the field that pins an id.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from imagectl.building.base_image import resolve_base_image
from imagectl.clouds.base_image import PINNED, RESOLVED
from imagectl.clouds.registry import cloud_spec
from imagectl.core.errors import UserError
from tests.fakes.fixtures import CloudEnv, resolved_stack

pytest_plugins = ["tests.fakes.fixtures"]


def _ami(
    ec2: Any,
    backend: Any,
    name: str,
    *,
    owner: str,
    created: str,
    arch: str = "x86_64",
    state: str = "available",
) -> str:
    image_id = str(
        ec2.register_image(
            Name=name, Architecture=arch, RootDeviceName="/dev/sda1", VirtualizationType="hvm"
        )["ImageId"]
    )
    record = backend.amis[image_id]
    record.owner_id, record.state = owner, state
    record.creation_date = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    return image_id


def test_aws_most_recent_match_of_owner_and_name(aws_moto: Any) -> None:
    import boto3

    resolved = resolved_stack()
    aws = resolved.stack.clouds.aws
    region, owner = aws.build.region, aws.base_image.owner
    ec2 = boto3.client("ec2", region_name=region)
    backend = aws_moto.backend(region)
    stem = aws.base_image.name.replace("*", "")
    old = _ami(ec2, backend, stem + "20261001", owner=owner, created="2026-10-01T00:00:00.000Z")
    new = _ami(ec2, backend, stem + "20261101", owner=owner, created="2026-11-01T00:00:00.000Z")
    _ami(ec2, backend, stem + "20261201", owner="123456789012", created="2026-12-01T00:00:00.000Z")
    _ami(
        ec2,
        backend,
        stem + "20261202",
        owner=owner,
        created="2026-12-02T00:00:00.000Z",
        arch="arm64",
    )
    _ami(
        ec2,
        backend,
        stem + "20261203",
        owner=owner,
        created="2026-12-03T00:00:00.000Z",
        state="pending",
    )
    _ami(ec2, backend, "other-image-20261204", owner=owner, created="2026-12-04T00:00:00.000Z")
    base = resolve_base_image(
        resolved, cloud_spec("aws"), provider=CloudEnv("aws", aws_moto).provider()
    )
    assert (base.id, base.source, base.created_at) == (
        new,
        RESOLVED,
        dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc),
    )
    assert base.id != old and base.name == stem + "20261101"


def test_aws_nothing_matching_names_the_pin(aws_moto: Any) -> None:
    with pytest.raises(
        UserError, match=r"no AMI in us-east-1 matches.*clouds\.aws\.base_image\.id"
    ):
        resolve_base_image(
            resolved_stack(), cloud_spec("aws"), provider=CloudEnv("aws", aws_moto).provider()
        )


def test_a_pinned_id_asks_no_cloud() -> None:
    resolved = resolved_stack()
    aws = resolved.stack.clouds.aws.model_copy(
        update={
            "base_image": resolved.stack.clouds.aws.base_image.model_copy(
                update={"id": "ami-0123456789abcdef0"}
            )
        }
    )
    stack = resolved.stack.model_copy(
        update={"clouds": resolved.stack.clouds.model_copy(update={"aws": aws})}
    )
    pinned = resolved.__class__(**{**resolved.__dict__, "stack": stack})
    base = resolve_base_image(pinned, cloud_spec("aws"), provider=None)  # no provider needed
    assert (base.id, base.source) == ("ami-0123456789abcdef0", PINNED)


def test_gcp_family_newest_not_deprecated_in_its_project(gcp_fake: Any) -> None:
    resolved = resolved_stack()
    base_cfg = resolved.stack.clouds.gcp.base_image
    project, family = base_cfg.project, base_cfg.family
    gcp_fake.add_image(
        "ubuntu-2204-jammy-v20261001",
        family=family,
        project=project,
        created="2026-10-01T00:00:00.000-07:00",
    )
    gcp_fake.add_image(
        "ubuntu-2204-jammy-v20261101",
        family=family,
        project=project,
        created="2026-11-01T00:00:00.000-07:00",
    )
    gcp_fake.add_image(
        "ubuntu-2204-jammy-v20261201",
        family=family,
        project="someone-else",
        created="2026-12-01T00:00:00.000-07:00",
    )
    deprecated = gcp_fake.add_image(
        "ubuntu-2204-jammy-v20261202",
        family=family,
        project=project,
        created="2026-12-02T00:00:00.000-07:00",
    )
    deprecated["deprecated"] = {"state": "DEPRECATED"}
    base = resolve_base_image(
        resolved, cloud_spec("gcp"), provider=CloudEnv("gcp", gcp_fake).provider()
    )
    assert base.id == "ubuntu-2204-jammy-v20261101"
    assert base.name == f"projects/{project}/global/images/ubuntu-2204-jammy-v20261101"


def test_gcp_empty_family_names_the_pin(gcp_fake: Any) -> None:
    with pytest.raises(UserError, match=r"has no image that is not deprecated.*base_image\.image"):
        resolve_base_image(
            resolved_stack(), cloud_spec("gcp"), provider=CloudEnv("gcp", gcp_fake).provider()
        )


def test_azure_highest_marketplace_version(azure_fake: Any) -> None:
    resolved = resolved_stack()
    azure = resolved.stack.clouds.azure
    b, location = azure.base_image, azure.build.location
    for version in ("22.04.202409110", "22.04.202501150", "22.04.20250115", "22.04.99"):
        azure_fake.add_vm_image_version(location, b.publisher, b.offer, b.sku, version)
    azure_fake.add_vm_image_version("westus3", b.publisher, b.offer, b.sku, "22.04.209901010")
    base = resolve_base_image(
        resolved, cloud_spec("azure"), provider=CloudEnv("azure", azure_fake).provider()
    )
    assert base.id == "22.04.202501150"
    assert base.name == f"{b.publisher}:{b.offer}:{b.sku}:22.04.202501150"


def test_azure_unknown_sku_names_the_pin(azure_fake: Any) -> None:
    with pytest.raises(UserError, match=r"marketplace has no version.*base_image\.version"):
        resolve_base_image(
            resolved_stack(), cloud_spec("azure"), provider=CloudEnv("azure", azure_fake).provider()
        )


def test_plan_records_the_resolved_ami_in_the_var_file(
    aws_moto: Any, cli: Any, tmp_path: Any
) -> None:
    import json

    import boto3

    resolved = resolved_stack()
    aws = resolved.stack.clouds.aws
    ec2 = boto3.client("ec2", region_name=aws.build.region)
    ami = _ami(
        ec2,
        aws_moto.backend(aws.build.region),
        aws.base_image.name.replace("*", "1"),
        owner=aws.base_image.owner,
        created="2026-11-01T00:00:00.000Z",
    )
    r = cli("plan", "--stack", "h100-training", "--cloud", "aws", "--out", str(tmp_path), "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["matrix"]
    assert row["base_image"]["id"] == ami and row["base_image"]["source"] == "resolved"
    pkr = json.loads(Path(row["packer_var_file"]).read_text())
    assert pkr["aws_source_ami"] == ami
