"""The canary pointer on AWS: a second ``aws:ec2:image`` SSM parameter beside
latest, ``/imagectl/<stack>/canary`` (the reference's per-cloud pointers), written and read
back as latest is, and deleted when a rolled-back canary named no image before; latest is
never touched. On moto's SSM."""

from __future__ import annotations

import boto3

from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]

REGION = "us-east-1"


def test_the_canary_is_its_own_ssm_parameter(aws_moto) -> None:
    from imagectl.promotion.context import provider_for

    env = CloudEnv("aws", aws_moto)
    provider = provider_for(env.resolved, "aws")
    old, new = env.seed_candidate(), env.seed_candidate()
    provider.set_pointer("h100-training", REGION, old.image_id)
    assert provider.get_canary_pointer("h100-training", REGION) is None
    provider.set_canary_pointer("h100-training", REGION, new.image_id)
    assert provider.get_canary_pointer("h100-training", REGION) == new.image_id
    assert provider.get_pointer("h100-training", REGION) == old.image_id
    ssm = boto3.client("ssm", region_name=REGION)
    param = ssm.get_parameter(Name="/imagectl/h100-training/canary")["Parameter"]
    assert (param["Value"], param["DataType"]) == (new.image_id, "aws:ec2:image")
    provider.set_canary_pointer("h100-training", REGION, None)
    assert provider.get_canary_pointer("h100-training", REGION) is None
    provider.set_canary_pointer("h100-training", REGION, None)  # already gone: no error
    assert provider.get_pointer("h100-training", REGION) == old.image_id
