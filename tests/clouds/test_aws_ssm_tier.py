"""The "latest" pointer's SSM parameter tier, from the stack
(``clouds.aws.ssm_parameter_tier``): Parameter Store shares only advanced parameters
with other accounts through AWS RAM, and an advanced parameter cannot return to the
standard tier (Systems Manager User Guide, "Managing parameter tiers"; "Sharing
parameters"). The emulator refuses the downgrade as SSM does."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]

REGION = "us-east-1"
NAME = "/imagectl/h100-training/latest"


def _provider(env: CloudEnv, tier: str):
    return env.provider_with({"ssm_parameter_tier": tier})


def _tier() -> str:
    ssm = boto3.client("ssm", region_name=REGION)
    (param,) = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [NAME]}])[
        "Parameters"
    ]
    return str(param["Tier"])


def test_an_advanced_pointer_is_written_advanced_and_stays_so(aws_moto) -> None:
    env = CloudEnv("aws", aws_moto)
    first, second = env.seed_candidate(), env.seed_candidate()
    advanced = _provider(env, "Advanced")
    advanced.set_pointer("h100-training", REGION, first.image_id)
    assert _tier() == "Advanced"
    advanced.set_pointer("h100-training", REGION, second.image_id)
    assert advanced.get_pointer("h100-training", REGION) == second.image_id
    assert _tier() == "Advanced"
    # a stack switched back to Standard cannot downgrade it: SSM refuses, nothing moves
    with pytest.raises(ClientError, match="standard parameter"):
        _provider(env, "Standard").set_pointer("h100-training", REGION, first.image_id)
    assert advanced.get_pointer("h100-training", REGION) == second.image_id


def test_the_default_tier_is_standard(aws_moto) -> None:
    env = CloudEnv("aws", aws_moto)
    image = env.seed_candidate()
    _provider(env, "Standard").set_pointer("h100-training", REGION, image.image_id)
    assert _tier() == "Standard"
