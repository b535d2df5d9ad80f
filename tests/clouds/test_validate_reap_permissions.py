"""validate-image and reap run under exactly the shipped permission documents
(images/permissions/<cloud>/{validate,reap}.*), enforced by each emulator
(tests/fakes/permissions.py): the full document passes, every entry of it is needed, and
a document missing one permission fails the run naming that permission.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clouds.scenario import HEALTHY, write_override
from tests.fakes import permissions as perm
from tests.fakes.fixtures import CloudEnv

RUNNER = "203.0.113.7/32"
# Needed only to clean up after the verdict (terminate, and the reads that confirm it).
CLEANUP = {
    "aws": {"ec2:DeleteSecurityGroup", "ec2:DescribeSecurityGroups", "ec2:TerminateInstances"},
    "gcp": {"compute.firewalls.delete", "compute.instances.delete", "compute.instances.list"},
    "azure": {
        "Microsoft.Compute/virtualMachines/delete",
        "Microsoft.Network/networkInterfaces/delete",
        "Microsoft.Network/networkSecurityGroups/delete",
        "Microsoft.Network/publicIPAddresses/delete",
    },
}


@contextlib.contextmanager
def enforced(env: CloudEnv, monkeypatch: pytest.MonkeyPatch, doc: Any) -> Iterator[perm.Enforcer]:
    if env.cloud == "aws":
        with perm.aws_enforced(monkeypatch, None, doc) as enforcer:
            yield enforcer
        return
    if env.cloud == "gcp":
        enforcer = perm.enforce_gcp(env.fake, perm.granted("gcp", doc))
    else:
        enforcer = perm.enforce_arm(env.fake, doc["Actions"], doc["NotActions"])
    try:
        yield enforcer
    finally:
        env.fake.authorize = None


def _validate(cli: Any, env: CloudEnv, image: Any, tmp_path: Path) -> Any:
    override = write_override(tmp_path, [HEALTHY], cloud=env.cloud)
    return cli("validate-image", image.image_id, "--cloud", env.cloud, "--stack",
               "h100-training", "--inventory-override", str(override), "--reach-timeout", "2",
               "--hosts", "1", "--runner-cidr", RUNNER, "--json")  # fmt: skip


def _expired(env: CloudEnv) -> str:
    image = env.seed_candidate()
    inst = env.provider().launch(
        image,
        "p5.48xlarge" if env.cloud == "aws" else "x",
        location=env.locations()[0],
        ttl=dt.timedelta(hours=-1),
        launched_by="test",
        stack="h100-training",
    )
    return str(inst.instance_id)


def _unused(env: CloudEnv, doc: Any, enforcer: perm.Enforcer) -> list[str]:
    return sorted(set(perm.granted(env.cloud, doc)) - enforcer.matched)


def test_validate_and_reap_under_exactly_the_documents(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = cloud_env.seed_candidate()
    validate = perm.load_document(cloud_env.cloud, "validate")
    with enforced(cloud_env, monkeypatch, validate) as enforcer:
        result = _validate(cli, cloud_env, image, tmp_path)
    assert result.code == 0, result.out[-2000:] + result.err[-2000:]
    assert result.json()["state"] == "validated"
    assert enforcer.refused == [] and enforcer.unknown == []
    assert _unused(cloud_env, validate, enforcer) == []

    expired = _expired(cloud_env)
    reap = perm.load_document(cloud_env.cloud, "reap")
    with enforced(cloud_env, monkeypatch, reap) as reaper:
        result = cli("reap", "--cloud", cloud_env.cloud, "--stack", "h100-training", "--json")
    assert result.code == 0, result.err
    assert [(r["instance_id"], r["action"]) for r in result.json()["instances"]] == [
        (expired, "terminated")
    ]
    assert reaper.refused == [] and reaper.unknown == []
    assert _unused(cloud_env, reap, reaper) == []


def _cases(role: str) -> list[Any]:
    return [
        pytest.param(cloud, p, id=f"{cloud}-{p}")
        for cloud in ("aws", "gcp", "azure")
        for p in perm.granted(cloud, perm.load_document(cloud, role))
    ]


@pytest.fixture
def env_for(request: pytest.FixtureRequest) -> CloudEnv:
    fixture = {"aws": "aws_moto", "gcp": "gcp_fake", "azure": "azure_fake"}[request.param]
    return CloudEnv(request.param, request.getfixturevalue(fixture))


@pytest.mark.parametrize(("env_for", "permission"), _cases("reap"), indirect=["env_for"])
def test_reap_without_one_permission_fails_naming_it(
    cli: Any, env_for: CloudEnv, permission: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _expired(env_for)
    doc = perm.without(env_for.cloud, perm.load_document(env_for.cloud, "reap"), permission)
    with enforced(env_for, monkeypatch, doc) as enforcer:
        result = cli("reap", "--cloud", env_for.cloud, "--stack", "h100-training", "--json")
    assert permission in enforcer.refused
    assert result.code != 0 or "error" in result.out, result.out
    assert permission in result.out + result.err, (result.out + result.err)[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize(("env_for", "permission"), _cases("validate"), indirect=["env_for"])
def test_validate_without_one_permission_fails_naming_it(
    cli: Any, env_for: CloudEnv, permission: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = env_for.seed_candidate()
    doc = perm.without(env_for.cloud, perm.load_document(env_for.cloud, "validate"), permission)
    with enforced(env_for, monkeypatch, doc) as enforcer:
        result = _validate(cli, env_for, image, tmp_path)
    assert permission in enforcer.refused
    assert permission in result.out + result.err, (result.out + result.err)[-2000:]
    if permission in CLEANUP[env_for.cloud]:
        # the verdict was reached; the instance it could not clean up is reported, named
        # with the refused permission, under "termination errors", and the exit is not 0
        assert result.json().get("termination_errors"), result.out[-2000:]
        assert result.code == 1 and "could not be terminated" in result.err, result.err
    else:
        assert result.code != 0, result.out[-2000:]
