"""Small pure pieces: label encoding, AZ -> region, TTL expiry, the inventory override,
and bad input to the commands (exit 2 with a message naming the problem)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from imagectl.clouds.aws.provider import region_of
from imagectl.clouds.base import Instance
from imagectl.clouds.common import instance_tags, is_expired
from imagectl.clouds.gcp.labels import from_labels, to_labels
from imagectl.core.errors import UserError
from imagectl.tags import TAG_TTL
from imagectl.validation.inventory import InventoryOverride


def test_gcp_labels_round_trip_the_ttl_and_obey_label_rules() -> None:
    now = dt.datetime(2026, 11, 22, 5, 10, tzinfo=dt.timezone.utc)
    tags = instance_tags(stack="H100-Training", image_id="img", ttl=dt.timedelta(hours=3),
                         launched_by="ci@example.com", now=now)  # fmt: skip
    labels = to_labels(tags)
    assert labels["imagectl-expires-at"] == "20261122t081000z"
    assert labels["imagectl-launched-by"] == "ci-example-com"
    for key, value in labels.items():
        assert len(key) <= 63 and len(value) <= 63
        assert key == key.lower() and ":" not in key and "@" not in value
    back = from_labels(labels)
    assert back[TAG_TTL] == "2026-11-22T08:10:00+00:00"


def test_region_of_an_availability_zone() -> None:
    assert region_of("us-east-1a") == "us-east-1"
    assert region_of("ap-southeast-2c") == "ap-southeast-2"
    assert region_of("us-east-1") == "us-east-1"


def test_expiry() -> None:
    now = dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc)

    def inst(tags: dict[str, str]) -> Instance:
        return Instance("aws", "us-east-1a", "i-1", "p5.48xlarge", "ami-1", tags=tags)

    assert is_expired(inst({TAG_TTL: "2026-11-21T23:59:00+00:00"}), now)
    assert not is_expired(inst({TAG_TTL: "2026-11-22T00:01:00+00:00"}), now)
    assert not is_expired(inst({}), now)  # no TTL: never reaped


def test_inventory_override_slots_and_default(tmp_path: Path) -> None:
    path = tmp_path / "o.yaml"
    path.write_text("all: {ansible_connection: local}\nslots:\n  - {a: 1}\ndefault_slot: {a: 9}\n")
    o = InventoryOverride.load(path)
    assert o.local
    assert o.for_slot(0) == {"ansible_connection": "local", "a": 1}
    assert o.for_slot(5) == {"ansible_connection": "local", "a": 9}


def test_inventory_override_rejects_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "o.yaml"
    path.write_text("hosts: []\n")
    with pytest.raises(UserError, match="unknown key"):
        InventoryOverride.load(path)


def test_validate_image_needs_a_known_image(cli: Any, aws_moto: Any) -> None:
    result = cli("validate-image", "ami-00000000000000000", "--cloud", "aws",
                 "--stack", "h100-training", "--runner-cidr", "203.0.113.7/32")  # fmt: skip
    assert result.code == 2
    assert "ami-00000000000000000 was not found in aws region us-east-1" in result.err


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_validate_image_on_a_cloud_needs_the_runner_cidr(
    cli: Any, aws_moto: Any, cloud: str
) -> None:
    """Without --runner-cidr the security group / firewall rule / NSG admits nobody: the
    run is refused before any cloud call (exit 2, the flag named), not after the 900 s
    reach timeout (the docs' AWS example once omitted it and waited that long)."""
    result = cli("validate-image", "some-image", "--cloud", cloud,
                 "--stack", "h100-training")  # fmt: skip
    assert result.code == 2, result.err
    assert "--runner-cidr" in result.err and "admit" in result.err
    assert "was not found" not in result.err  # refused before looking for the image


def test_validate_image_without_stack_or_catalog_record(cli: Any, aws_moto: Any) -> None:
    result = cli("validate-image", "ami-00000000000000000", "--cloud", "aws")
    assert result.code == 2
    assert "--stack" in result.err


def test_validate_image_refuses_an_image_of_another_digest(cli: Any, aws_moto: Any) -> None:
    from tests.fakes.fixtures import CloudEnv

    cloud_env = CloudEnv("aws", aws_moto)
    image = cloud_env.seed_candidate(tags={"imagectl:stack-digest": "0" * 64})
    result = cli("validate-image", image.image_id, "--cloud", "aws", "--stack", "h100-training",
                 "--runner-cidr", "203.0.113.7/32")  # fmt: skip
    assert result.code == 2
    assert "Build a new candidate" in result.err
    assert cloud_env.live_instances() == []


def test_a_misspelt_provider_option_is_an_error_not_ignored() -> None:
    """Each cloud's provider is built from its typed options: a misspelt option fails
    where it is written (it was once swallowed by a provider's **_ignored), and one
    cloud's options are refused by another cloud."""
    from imagectl.clouds.aws.spec import AwsOptions
    from imagectl.clouds.gcp.spec import GcpOptions
    from imagectl.clouds.registry import cloud_spec, get_provider

    with pytest.raises(TypeError, match="regoin"):
        AwsOptions(regoin="us-east-1")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes AwsOptions, not GcpOptions"):
        get_provider(cloud_spec("aws"), GcpOptions(project="p"))
    assert AwsOptions(region="us-east-1").polled(0.5).poll_interval_s == 0.5
