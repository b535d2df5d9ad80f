"""The AWS template, built for real: Debian's packer against a local moto EC2 server.

moto instances do not run, so the build skips provisioning (``skip_provisioning``:
communicator none, no Ansible); everything else is the production path: imagectl's
var file from the h100-training stack, the staged template folder, the wrapper's
streaming and manifest parsing. boto3 then checks the AMI: present, tagged as a
candidate, in the build region and in no other.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from imagectl.building.base_image import resolve_base_image
from imagectl.clouds.options import provider_options
from imagectl.clouds.registry import cloud_spec, get_provider
from imagectl.packer.build import run_build
from imagectl.packer.machine_readable import PackerEvent
from imagectl.paths import find_workspace
from imagectl.stacks import load_resolved
from tests.fakes.fixtures import fake_aws_credentials, moto_serving, register_base_ami
from tests.support import ROOT, require_tool


@pytest.fixture()
def moto_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    fake_aws_credentials(monkeypatch)
    with moto_serving() as endpoint:
        yield endpoint


def _ec2(endpoint: str, region: str) -> Any:
    import boto3

    return boto3.client("ec2", region_name=region, endpoint_url=endpoint)


def test_packer_builds_tagged_candidate_ami_in_build_region_only(
    moto_endpoint: str, tmp_path: Path
) -> None:
    require_tool("packer")
    ws = find_workspace(ROOT)
    _, resolved = load_resolved(ws.images, "h100-training")
    aws = resolved.stack.clouds.aws
    assert aws is not None
    region = aws.build.region
    base_name = aws.base_image.name.replace("*", "20261101")
    base_ami = register_base_ami(moto_endpoint, region, base_name, aws.base_image.owner)
    # Decoys: the same name in another region, and in the build region from another owner.
    register_base_ami(moto_endpoint, "us-west-2", base_name, aws.base_image.owner)
    register_base_ami(moto_endpoint, region, base_name)
    spec = cloud_spec("aws")
    provider = get_provider(
        spec, replace(provider_options(resolved, spec), endpoint_url=moto_endpoint)
    )
    base = resolve_base_image(resolved, spec, provider=provider)
    assert base.id == base_ami

    events: list[PackerEvent] = []
    result = run_build(
        resolved,
        cloud_spec("aws"),
        workspace=ws,
        var_dir=tmp_path / "build",
        # Packer polls the emulator every second, as a build through the CLI does with
        # IMAGECTL_CLOUD_POLL_S (where moto's guests are patched in, a terminated
        # instance is shutting-down for two polls: 30 s each at the template's default)
        overrides={"aws_endpoint_ec2": moto_endpoint, "aws_polling_delay_seconds": "1"},
        base_image=base,
        skip_provisioning=True,
        env=None,
        on_event=events.append,
        timeout=300,
    )

    assert any(e.ui_level == "say" for e in events), "no progress was streamed"
    assert [a.location for a in result.artifacts] == [region]
    ami_id = result.artifacts[0].id
    assert ami_id.startswith("ami-") and ami_id != base_ami
    assert result.plan.packer_vars["aws_source_ami"] == base_ami  # Packer got the id

    images = _ec2(moto_endpoint, region).describe_images(ImageIds=[ami_id])["Images"]
    assert len(images) == 1
    image = images[0]
    assert image["Name"] == result.plan.packer_vars["image_name"]
    tags = {t["Key"]: t["Value"] for t in image.get("Tags", [])}
    pins = resolved.pins()
    assert tags["imagectl:stack"] == "h100-training"
    assert tags["imagectl:stack-digest"] == resolved.digest
    assert tags["imagectl:driver"] == pins.driver
    assert tags["imagectl:cuda"] == pins.cuda
    assert tags["imagectl:nccl"] == pins.nccl
    assert tags["imagectl:build-id"] == result.plan.build_id
    assert tags["imagectl:lifecycle"] == "candidate"
    assert len(tags["imagectl:git-commit"]) >= 7
    assert result.artifacts[0].tags == tags

    # No replication at build time: the candidate exists in the build region only.
    for other in aws.regions:
        if other == region:
            continue
        found = _ec2(moto_endpoint, other).describe_images(
            Owners=["self"], Filters=[{"Name": "name", "Values": [image["Name"]]}]
        )["Images"]
        assert found == [], f"candidate AMI copied to {other}"


@pytest.mark.parametrize(
    ("endpoint", "poll", "expected"),
    [
        ("http://127.0.0.1:5000", "0", {"aws_polling_delay_seconds": "1"}),
        ("http://127.0.0.1:5000", "2.5", {"aws_polling_delay_seconds": "3"}),
        ("http://127.0.0.1:5000", None, {}),  # an endpoint alone: the template's 30 s
        (None, "0", None),  # a real cloud: no endpoint, no polling override either
    ],
)
def test_packer_polls_an_emulator_at_the_providers_interval(
    monkeypatch: pytest.MonkeyPatch, endpoint: str | None, poll: str | None, expected: Any
) -> None:
    """Packer's own waits (instance stopped, AMI available, instance terminated) poll
    every ``aws_polling_delay_seconds`` (30 by default). Against an emulator named by
    IMAGECTL_AWS_ENDPOINT_URL they follow IMAGECTL_CLOUD_POLL_S like the providers, in
    whole seconds and never 0; against a real cloud nothing changes."""
    for name in ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL", "IMAGECTL_CLOUD_POLL_S"):
        monkeypatch.delenv(name, raising=False)
    if endpoint is not None:
        monkeypatch.setenv("IMAGECTL_AWS_ENDPOINT_URL", endpoint)
    if poll is not None:
        monkeypatch.setenv("IMAGECTL_CLOUD_POLL_S", poll)
    found = cloud_spec("aws").endpoint_packer_vars()
    if expected is None:
        assert found == {}
        return
    assert found == {"aws_endpoint_ec2": endpoint, **expected}
    declared = (ROOT / "images" / "aws" / "variables.pkr.hcl").read_text(encoding="utf-8")
    for name in found:
        assert f'variable "{name}"' in declared, name
