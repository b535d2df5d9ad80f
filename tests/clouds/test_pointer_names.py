"""Names the clouds accept, derived in one place per cloud and checked by lint.

Every pointer kind of every cloud (latest, canary) is named by its cloud's
``imagectl.clouds.<cloud>.pointers``; lint refuses a stack whose names the cloud would
refuse, and no name is ever cut to fit. The rules, from the clouds' references:
- Compute API reference, Image.family: 1-63 characters, RFC 1035
  (``[a-z]([-a-z0-9]*[a-z0-9])?``); the canary family is ``<family>-canary``, so a
  production family has at most 56 characters. Cut at 63, a 63-character family's canary
  *was* the production family: ``promote --canary`` moved latest on the Compute fake.
- Systems Manager API reference, PutParameter "Name": ``a-zA-Z0-9_.-`` and ``/``; not
  prefixed with "aws" or "ssm" (case-insensitive); at most fifteen levels. moto's SSM
  refuses the reserved prefixes as SSM does: the verdicts here are held to its answers.
- Azure Resource Manager naming rules (galleries: alphanumerics, ``_`` and ``.``;
  galleries/images: ``-`` too; both start and end alphanumeric, 1-80) and tag limits
  (name <= 512 characters without ``< > % & \\ ? /``, value <= 256).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import boto3
import pytest

from imagectl.core.errors import UserError
from tests.fakes.fixtures import CloudEnv
from tests.stacks.test_lint_and_plan import edit, rules_of

pytest_plugins = ["tests.fakes.fixtures"]

CLOUDS = ("aws", "gcp", "azure")
STACK = "h100-training"
REGION = "us-east-1"


def pointers(cloud: str) -> Any:
    return importlib.import_module(f"imagectl.clouds.{cloud}.pointers")


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_pointer_kind_of_every_cloud_has_one_name(cloud: str) -> None:
    """Each cloud names both pointers, and a canary never names what latest names."""
    from imagectl.clouds.base import Provider

    module = pointers(cloud)
    assert module.KINDS == ("latest", "canary")
    # the provider implements every kind the module names (get_/set_ + canary_ or not)
    for kind in module.KINDS:
        part = "pointer" if kind == "latest" else f"{kind}_pointer"
        for verb in ("get", "set"):
            assert hasattr(Provider, f"{verb}_{part}"), (cloud, kind)
    samples = {
        "aws": [("/imagectl", STACK), ("/team/images", "s1"), ("/a", "b" * 40)],
        "gcp": [(STACK,), ("a" * 56,), ("x",)],
        "azure": [("imagectl_gallery", STACK)],
    }[cloud]
    for args in samples:
        names = module.names(*args)
        assert set(names) == set(module.KINDS)
        assert names["canary"] != names["latest"], (cloud, args)
        assert module.problems(*args) == [], (cloud, args)


@pytest.mark.parametrize(
    ("family", "why"),
    [
        ("a" * 56, None),
        ("a" * 57, "64 characters, more than 63"),
        ("a" * 62, "69 characters"),  # cut to 63 it ended in "-": refused by Compute
        ("a" * 63, "70 characters"),  # cut to 63 it was the production family
        ("web-canary", "ends in '-canary'"),  # another stack's canary family
        ("9lives", "not an RFC 1035 name"),
    ],
)
def test_gcp_families(family: str, why: str | None) -> None:
    from imagectl.clouds.gcp.pointers import family_name, names, problems

    found = problems(family)
    if why is None:
        assert found == []
        assert family_name(family, "canary") == names(family)["canary"] == family + "-canary"
        assert len(names(family)["canary"]) <= 63
        return
    assert any(why in p for p in found), found
    with pytest.raises(UserError):
        family_name(family, "canary")


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        ("/imagectl", None),
        ("/team/ml/imagectl", None),
        ("/" + "/".join(f"l{i}" for i in range(13)), None),  # 13 + stack + pointer = 15
        ("/" + "/".join(f"l{i}" for i in range(14)), "16 levels deep"),
        ("/aws/imagectl", "prefixed with 'aws'"),
        ("/AWS", "prefixed with 'aws'"),
        ("/ssm/pointers", "prefixed with 'ssm'"),
        ("/awsome", "prefixed with 'aws'"),
        ("/Ssm-team", "prefixed with 'ssm'"),
    ],
)
def test_ssm_parameters(prefix: str, why: str | None) -> None:
    from imagectl.clouds.aws.pointers import names, parameter_name, problems

    found = problems(prefix)
    if why is None:
        assert found == []
        assert parameter_name(prefix, STACK, "canary") == names(prefix, STACK)["canary"]
    else:
        assert any(why in p for p in found), found
        with pytest.raises(UserError, match="ssm_parameter_prefix"):
            parameter_name(prefix, STACK, "latest")


def test_the_ssm_verdicts_are_moto_s(aws_moto) -> None:
    """What the rules refuse for a reserved prefix, SSM (moto) refuses; what they accept,
    it accepts: ``put_parameter`` of each name the provider would write."""
    from botocore.exceptions import ClientError

    from imagectl.clouds.aws.pointers import names, problems

    ssm = boto3.client("ssm", region_name=REGION)
    for prefix in ("/imagectl", "/team/imagectl", "/aws/x", "/AWS/x", "/ssm/x", "/awsome"):
        name = names(prefix, STACK)["latest"]
        try:
            # a text parameter: the name rules are the same, and moto_extensions defers
            # an aws:ec2:image write (its asynchronous validation) past this call
            ssm.put_parameter(Name=name, Value="ami-0123456789abcdef0", Type="String")
            accepted = True
        except ClientError:
            accepted = False
        assert accepted == (problems(prefix) == []), (prefix, problems(prefix))


def test_the_aws_provider_refuses_a_name_instead_of_sending_it(aws_moto) -> None:
    from imagectl.promotion.context import provider_for

    env = CloudEnv("aws", aws_moto)
    provider = provider_for(env.resolved, "aws")
    image = env.seed_candidate()
    provider.ssm_prefix = "/aws/imagectl"  # past lint (a stack file edited by hand)
    with pytest.raises(UserError, match="prefixed with 'aws'"):
        provider.set_canary_pointer(STACK, REGION, image.image_id)
    ssm = boto3.client("ssm", region_name=REGION)
    assert ssm.describe_parameters()["Parameters"] == []


def test_a_63_character_family_never_makes_the_canary_latest(gcp_fake: Any) -> None:
    """On the Compute fake: before, the canary family of a 63-character family was the
    family itself, so pointing the canary moved latest. Now the provider refuses, and
    latest still names its image."""
    env = CloudEnv("gcp", gcp_fake)
    provider = env.provider()
    region = env.resolved.stack.clouds.gcp.regions[0]
    old, cand = env.seed_candidate(), env.seed_candidate()
    provider.set_pointer(STACK, region, old.image_id)
    latest = provider.get_pointer(STACK, region)
    assert latest is not None
    provider.family = "f" * 63  # past lint (a stack file edited by hand)
    with pytest.raises(UserError, match="70 characters"):
        provider.set_canary_pointer(STACK, region, cand.image_id)
    provider.family = env.resolved.stack.clouds.gcp.family
    assert provider.get_pointer(STACK, region) == latest
    assert provider.get_canary_pointer(STACK, region) is None


def test_a_56_character_family_has_its_canary_on_the_fake(gcp_fake: Any) -> None:
    env = CloudEnv("gcp", gcp_fake)
    family = "f" * 56
    provider = env.provider_with({"family": family})
    region = env.resolved.stack.clouds.gcp.regions[0]
    old, cand = env.seed_candidate(), env.seed_candidate()
    provider.set_pointer(STACK, region, old.image_id)
    latest = provider.get_pointer(STACK, region)
    provider.set_canary_pointer(STACK, region, cand.image_id)
    assert provider.get_canary_pointer(STACK, region) == cand.image_id
    assert provider.get_pointer(STACK, region) == latest  # latest did not move
    raw = provider.clients.images.get(project=provider.project, image=cand.image_id)
    assert raw.family == family + "-canary"


def test_azure_names() -> None:
    from imagectl.clouds.azure.pointers import (
        CANARY_VALUE,
        MAX_TAG_NAME,
        MAX_TAG_VALUE,
        TAG_FORBIDDEN,
        problems,
    )
    from imagectl.tags import TAG_CANARY

    assert len(TAG_CANARY) <= MAX_TAG_NAME and not TAG_FORBIDDEN & set(TAG_CANARY)
    assert len(CANARY_VALUE) <= MAX_TAG_VALUE
    assert problems("imagectl_gallery", "h100-training") == []
    assert any("gallery name 'my-gallery'" in p for p in problems("my-gallery", "d"))
    assert any("image definition 'd_'" in p for p in problems("g", "d_"))
    assert any("image definition '-d'" in p for p in problems("g", "-d"))


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("    family: h100-training", "    family: " + "f" * 63, "more than 63"),
        ("    family: h100-training", "    family: h100-training-canary", "ends in '-canary'"),
        ("      name: imagectl_gallery", "      name: imagectl-gallery", "gallery name"),
        ("clouds:\n  aws:\n", "clouds:\n  aws:\n    ssm_parameter_prefix: /aws/imagectl\n",
         "prefixed with 'aws'"),
    ],
)  # fmt: skip
def test_lint_refuses_them_naming_the_stack_file(
    cli, workspace_copy: Path, old: str, new: str, needle: str
) -> None:
    edit(workspace_copy, STACK, old, new)
    result = cli("--root", str(workspace_copy), "lint", "--stack", STACK, "--json")
    assert result.code == 2  # a schema error: the stack is not read at all
    problems = rules_of(result.json(), STACK)["SCHEMA"]
    hits = [p for p in problems if needle in p["message"]]
    assert hits, problems
    assert hits[0]["where"].startswith(f"images/stacks/{STACK}.yaml") or (
        f"{STACK}.yaml" in hits[0]["where"]
    ), hits[0]
