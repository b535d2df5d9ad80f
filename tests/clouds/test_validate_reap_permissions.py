"""validate-image and reap run under exactly the shipped permission documents
(images/permissions/<cloud>/{validate,reap}.*), enforced by each emulator
(tests/fakes/permissions.py): the full document passes, every entry of it is needed by
one of the runs it serves (validate: a single-node run and a multi-node one, which also
creates, uses and deletes the run's placement; reap: an expired instance and the expired
placement a killed multi-node run left), and a document missing one permission fails the
run that needs it, naming that permission.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clouds.scenario import HEALTHY, IMAGE_FAULT, write_override
from tests.contract.call_inventory import off_the_happy_path
from tests.fakes import permissions as perm
from tests.fakes.fixtures import CloudEnv, launch, placement

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
# Needed only by a multi-node run (--nodes N): its placement, created before the launches,
# named by each, deleted after the terminations (imagectl.clouds.placement).
PLACEMENT = {
    "aws": {"ec2:CreatePlacementGroup", "ec2:DeletePlacementGroup"},
    "gcp": {
        "compute.regionOperations.get",
        "compute.resourcePolicies.create",
        "compute.resourcePolicies.delete",
        "compute.resourcePolicies.use",
    },
    "azure": {
        "Microsoft.Compute/proximityPlacementGroups/delete",
        "Microsoft.Compute/proximityPlacementGroups/write",
    },
}
# ...of which only the clean-up after the verdict


def _not_run(cloud: str, role: str) -> set[str]:
    """Granted for calls only an option these runs do not set reaches (a subnet, a
    reservation, an instance profile): held by the call inventory instead
    (tests/contract/test_call_inventory.py)."""
    return off_the_happy_path(cloud, role) - PLACEMENT[cloud]


PLACEMENT_CLEANUP = {
    "aws": {"ec2:DeletePlacementGroup"},
    "gcp": {"compute.resourcePolicies.delete"},
    "azure": {"Microsoft.Compute/proximityPlacementGroups/delete"},
}


@contextlib.contextmanager
def enforced(env: CloudEnv, monkeypatch: pytest.MonkeyPatch, doc: Any) -> Iterator[perm.Enforcer]:
    with perm.enforced(env.cloud, env.fake, monkeypatch, doc) as enforcer:
        yield enforcer


def _validate(cli: Any, env: CloudEnv, image: Any, tmp_path: Path) -> Any:
    override = write_override(tmp_path, [HEALTHY], cloud=env.cloud)
    return cli("validate-image", image.image_id, "--cloud", env.cloud, "--stack",
               "h100-training", "--inventory-override", str(override), "--reach-timeout", "2",
               "--hosts", "1", "--runner-cidr", RUNNER, "--json")  # fmt: skip


def _validate_nodes(cli: Any, env: CloudEnv, image: Any, tmp_path: Path) -> Any:
    """``--nodes 2``: both nodes in the cloud's placement. The image is faulty on both, so
    the verdict (blocked) comes from the nodes alone, before any collectives: the same
    cloud calls as a passing run (tests/clouds/test_multinode_validation.py, which runs
    under this document too), without torch."""
    override = write_override(tmp_path, [IMAGE_FAULT, IMAGE_FAULT], cloud=env.cloud)
    return cli("validate-image", image.image_id, "--cloud", env.cloud, "--stack",
               "h100-training", "--inventory-override", str(override), "--reach-timeout", "2",
               "--nodes", "2", "--runner-cidr", RUNNER, "--json")  # fmt: skip


def _expired(env: CloudEnv) -> tuple[str, str]:
    """What a killed runner leaves: an expired instance, and the expired placement of a
    multi-node run (no instance in it any more); their ids."""
    image = env.seed_candidate()
    location = env.locations()[0]
    shape = "p5.48xlarge" if env.cloud == "aws" else "x"
    ttl = dt.timedelta(hours=-1)
    provider = env.provider()
    inst = launch(provider, image, shape, location, ttl=ttl)
    run = placement(provider, image, shape, location, ttl=ttl)
    assert run is not None
    return str(inst.instance_id), run.name


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
    # the placement's entries are the multi-node run's alone
    not_run = _not_run(cloud_env.cloud, "validate")
    assert sorted(set(perm.unused(cloud_env.cloud, validate, enforcer)) - not_run) == sorted(
        PLACEMENT[cloud_env.cloud]
    )
    second = cloud_env.seed_candidate()
    with enforced(cloud_env, monkeypatch, validate) as nodes:
        multi = _validate_nodes(cli, cloud_env, second, tmp_path)
    data = multi.json()
    assert data["state"] == "blocked" and data["termination_errors"] == {}, data
    assert [p["kind"] for p in data["placements"]] and cloud_env.live_instances() == []
    assert nodes.refused == [] and nodes.unknown == []
    # least privilege over the union of the runs the document serves
    assert set(perm.unused(cloud_env.cloud, validate, enforcer, nodes)) <= not_run

    expired, expired_placement = _expired(cloud_env)
    reap = perm.load_document(cloud_env.cloud, "reap")
    with enforced(cloud_env, monkeypatch, reap) as reaper:
        result = cli("reap", "--cloud", cloud_env.cloud, "--stack", "h100-training", "--json")
    assert result.code == 0, result.err
    assert [(r["instance_id"], r["action"]) for r in result.json()["instances"]] == [
        (expired, "terminated")
    ]
    assert [(r["placement"], r["action"]) for r in result.json()["placements"]] == [
        (expired_placement, "deleted")
    ]
    assert reaper.refused == [] and reaper.unknown == []
    assert set(perm.unused(cloud_env.cloud, reap, reaper)) <= _not_run(cloud_env.cloud, "reap")


def _cases(role: str) -> list[Any]:
    return [
        pytest.param(cloud, p, id=f"{cloud}-{p}")
        for cloud in ("aws", "gcp", "azure")
        for p in perm.granted(cloud, perm.load_document(cloud, role))
        if p not in _not_run(cloud, role)
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
    run = _validate_nodes if permission in PLACEMENT[env_for.cloud] else _validate
    with enforced(env_for, monkeypatch, doc) as enforcer:
        result = run(cli, env_for, image, tmp_path)
    assert permission in enforcer.refused
    assert permission in result.out + result.err, (result.out + result.err)[-2000:]
    if permission in PLACEMENT_CLEANUP[env_for.cloud]:
        # the verdict was reached and the nodes terminated; the placement left behind is
        # reported, named with the refused permission
        data = result.json()
        assert data["state"] == "blocked" and env_for.live_instances() == [], data
        (error,) = data["termination_errors"].values()
        assert permission in error and result.code == 1, data
    elif permission in CLEANUP[env_for.cloud]:
        # the verdict was reached; the instance it could not clean up is reported, named
        # with the refused permission, under "termination errors", and the exit is not 0
        assert result.json().get("termination_errors"), result.out[-2000:]
        assert result.code == 1 and "could not be terminated" in result.err, result.err
    else:
        assert result.code != 0, result.out[-2000:]
