"""A validation run's final sweep terminates only its own instances, however long the
launcher's name.

The sweep finds an instance whose launch call was interrupted (no id came back) by its
``imagectl:launched-by`` tag: the actor and the run's token. Before, the tag was
``<actor>/run-<token>`` compared in its GCP label form on every cloud: lower-cased and
cut to 63 characters (Google's label limit), so with an actor of 63 characters or more
(``IMAGECTL_ACTOR``, a CI identity) the token was cut off, and a run's sweep terminated
the instances of every other run of the same actor, on AWS and Azure as on GCP. Now the
token comes first and a tag matches only as the run wrote it or as GCP stores it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3

from imagectl.tags import TAG_LAUNCHED_BY, TAG_MANAGED, TAG_STACK, TAG_TTL
from tests.clouds.scenario import HEALTHY, stand_in_validator, write_override
from tests.fakes.fixtures import CloudEnv

ACTOR = "github:example-org/gpu-images/.github/workflows/build.yml@refs/heads/main#4711"


def test_a_concurrent_runs_instance_of_the_same_actor_survives_the_sweep(
    cli: Any, aws_moto: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    assert len(ACTOR) >= 63
    env = CloudEnv("aws", aws_moto)
    image = env.seed_candidate()
    ec2 = boto3.client("ec2", region_name="us-east-1")
    # another run of the same actor, in flight: its host carries that run's tag
    other = ec2.run_instances(
        ImageId=image.image_id, MinCount=1, MaxCount=1, InstanceType="p5.48xlarge",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": TAG_MANAGED, "Value": "true"}, {"Key": TAG_STACK, "Value": "h100-training"},
            {"Key": TAG_TTL, "Value": "2099-01-01T00:00:00+00:00"},
            {"Key": TAG_LAUNCHED_BY, "Value": f"{ACTOR}/run-0badc0de"},
        ]}],
    )["Instances"][0]["InstanceId"]  # fmt: skip
    assert other in env.live_instances()
    validator = stand_in_validator(tmp_path / "validator", "exit 3")
    override = write_override(
        tmp_path, [{"validate_snapshot": HEALTHY, "validate_imagectl": str(validator)}]
    )
    monkeypatch.setenv("IMAGECTL_ACTOR", ACTOR)
    r = cli("validate-image", image.image_id, "--cloud", "aws", "--stack", "h100-training",
            "--inventory-override", str(override), "--reach-timeout", "2", "--json")  # fmt: skip
    data = r.json()
    (mine,) = [h["instance_id"] for h in data["launched"]]
    assert data["terminated"] == [mine], data["terminated"]
    assert env.live_instances() == [other]  # the other run's host is left to that run
