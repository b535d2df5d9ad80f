"""`imagectl doctor --cloud gcp` reads the organization policies that decide whether a run
can work, before any spend: ``constraints/compute.requireOsLogin`` (metadata ``ssh-keys``,
the run's key, are then ignored: Compute Engine, "About OS Login") and
``constraints/gcp.resourceLocations`` (Resource Manager v1 ``getEffectiveOrgPolicy``,
``orgpolicy.policy.get``; the fake answers it, tests/fakes/doctor_apis.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clouds.test_doctor import PROJECT, RUNNER, STACK, merged, own_ids
from tests.fakes import permissions as perm
from tests.fakes.doctor_apis import GcpDoctorApis
from tests.fakes.gcp_compute import FakeGcpCompute


@pytest.fixture
def gcp(workspace_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    own_ids(workspace_copy)
    with FakeGcpCompute(project=PROJECT) as fake:
        monkeypatch.setenv("IMAGECTL_GCP_ENDPOINT", fake.endpoint)
        apis = GcpDoctorApis(fake, region="us-central1")
        apis.quotas["NVIDIA_H100_GPUS"] = (16.0, 0.0)
        yield workspace_copy, (fake, apis)


def _doctor(cli: Any, gcp: tuple[Path, Any], doc: Any | None = None) -> Any:
    root, (fake, apis) = gcp
    apis.enforcer = perm.enforce_gcp(fake, perm.granted("gcp", doc or merged("gcp")))
    return cli("--root", str(root), "doctor", "--stack", STACK, "--cloud", "gcp",
               "--runner-cidr", RUNNER)  # fmt: skip


def _lines(result: Any, status: str) -> list[str]:
    return [ln for ln in result.out.splitlines() if ln.split()[:2] == [status, "resources"]]


def test_no_policy_is_green(cli: Any, gcp: Any) -> None:
    result = _doctor(cli, gcp)
    assert result.code == 0, result.out + result.err
    assert any("OS Login is not required" in ln for ln in _lines(result, "ok"))


def test_required_os_login_is_a_blocker_before_spend(cli: Any, gcp: Any) -> None:
    fake = gcp[1][0]
    fake.org_policies["constraints/compute.requireOsLogin"] = {"booleanPolicy": {"enforced": True}}
    result = _doctor(cli, gcp)
    assert result.code == 1
    (line,) = _lines(result, "blocker")
    assert "compute.requireOsLogin" in line and "ssh-keys" in line
    assert fake.calls("POST", "/instances$") == []  # nothing launched


@pytest.mark.parametrize(
    ("policy", "status", "words"),
    [
        ({"allowedValues": ["europe-west4", "zones:europe-west4-a"]}, "blocker",
         "does not allow"),
        ({"deniedValues": ["us"]}, "blocker", "does not allow us"),
        ({"allowedValues": ["in:us-locations"]}, "warning", "cannot decide"),
        ({"allValues": "DENY"}, "blocker", "does not allow"),
    ],
)  # fmt: skip
def test_resource_locations_are_checked_against_the_stacks_locations(
    cli: Any, gcp: Any, policy: dict[str, Any], status: str, words: str
) -> None:
    gcp[1][0].org_policies["constraints/gcp.resourceLocations"] = {"listPolicy": policy}
    result = _doctor(cli, gcp)
    lines = _lines(result, status)
    assert any(words in ln and "gcp.resourceLocations" in ln for ln in lines), result.out


def test_an_explicit_allow_list_naming_every_location_is_green(cli: Any, gcp: Any) -> None:
    allowed = ["us-central1", "zones:us-central1-a", "us", "eu"]
    gcp[1][0].org_policies["constraints/gcp.resourceLocations"] = {
        "listPolicy": {"allowedValues": allowed}
    }
    result = _doctor(cli, gcp)
    assert result.code == 0, result.out


def test_without_orgpolicy_get_the_finding_names_the_grant(cli: Any, gcp: Any) -> None:
    doc = perm.without("gcp", merged("gcp"), "orgpolicy.policy.get")
    result = _doctor(cli, gcp, doc)
    lines = _lines(result, "warning")
    assert any("orgpolicy.policy.get" in ln and "getEffectiveOrgPolicy" in ln for ln in lines)
    assert "Traceback" not in result.out + result.err
