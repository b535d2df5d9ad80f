"""`imagectl doctor` against the emulators, each holding the caller to the shipped
permission documents (tests/fakes/permissions.py) and answering the permission, quota and
resource questions the doctor asks (tests/fakes/doctor_apis.py, tests/fakes/moto_doctor.py):
green under exactly the build and validate documents; each blocker (a missing permission,
zero quota, a missing gallery, a placeholder subscription, no or an unreachable runner
address) one line naming what to do, exit 1. `build` and `validate-image` run the cheap
part first: exit 2 before any cloud call."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import moto_doctor
from tests.fakes import permissions as perm
from tests.fakes.azure_arm import FakeAzureArm
from tests.fakes.doctor_apis import ArmDoctorApis, GcpDoctorApis
from tests.fakes.gcp_compute import FakeGcpCompute

STACK = "h100-training"
RUNNER = "52.94.76.10/32"  # an internet address (the runner's, as checkip would print)
PROJECT = "acme-gpu-images"
SUBSCRIPTION = "2f6b8a4e-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
ORG = "arn:aws:organizations::210987654321:organization/o-k3j4h5g6f7"
ROLES = ("build", "validate")


def own_ids(root: Path) -> None:
    """The shipped stack with a team's own ids where it carries documentation ones."""
    path = root / "images" / "stacks" / f"{STACK}.yaml"
    text = path.read_text()
    text = text.replace("arn:aws:organizations::111122223333:organization/o-exampleorgid", ORG)
    text = re.sub(r"project: imagectl-images", f"project: {PROJECT}", text)
    text = text.replace("00000000-0000-0000-0000-000000000000", SUBSCRIPTION)
    path.write_text(text)


def merged(cloud: str, roles: tuple[str, ...] = ROLES) -> Any:
    """The documents of ``roles`` as one (the job's identity holds them all)."""
    docs = [perm.load_document(cloud, r) for r in roles]
    if cloud == "aws":
        return {"Version": "2012-10-17", "Statement": [s for d in docs for s in d["Statement"]]}
    if cloud == "gcp":
        return {"includedPermissions": sorted({p for d in docs for p in d["includedPermissions"]})}
    return {"Actions": sorted({a for d in docs for a in d["Actions"]}), "NotActions": []}


@dataclass
class Account:
    cloud: str
    root: Path
    fake: Any
    apis: Any
    monkeypatch: pytest.MonkeyPatch

    def grant(self, doc: Any) -> Any:
        if self.cloud == "gcp":
            self.apis.enforcer = perm.enforce_gcp(self.fake, perm.granted("gcp", doc))
            return None
        if self.cloud == "azure":
            self.apis.enforcer = perm.enforce_arm(self.fake, doc["Actions"], doc["NotActions"])
            return None
        return perm.aws_enforced(self.monkeypatch, None, doc)

    def zero_quota(self) -> None:
        if self.cloud == "aws":
            moto_doctor.EC2_QUOTAS["L-417A185B"] = 0
        elif self.cloud == "gcp":
            self.apis.quotas["NVIDIA_H100_GPUS"] = (0.0, 0.0)
        else:
            self.apis.usages["standardNDSH100v5Family"] = (0, 0)


@pytest.fixture(params=["aws", "gcp", "azure"])
def account(
    request: pytest.FixtureRequest, workspace_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Account]:
    own_ids(workspace_copy)
    cloud = request.param
    if cloud == "aws":
        with moto_doctor.account(monkeypatch):
            yield Account(cloud, workspace_copy, None, None, monkeypatch)
    elif cloud == "gcp":
        with FakeGcpCompute(project=PROJECT) as fake:
            monkeypatch.setenv("IMAGECTL_GCP_ENDPOINT", fake.endpoint)
            apis = GcpDoctorApis(fake, region="us-central1")
            apis.quotas["NVIDIA_H100_GPUS"] = (16.0, 0.0)
            yield Account(cloud, workspace_copy, fake, apis, monkeypatch)
    else:
        with FakeAzureArm(subscription=SUBSCRIPTION) as fake:
            monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", fake.endpoint)
            apis = ArmDoctorApis(fake, groups={"imagectl-build", "imagectl-images"})
            apis.usages["standardNDSH100v5Family"] = (192, 0)
            fake.add_gallery_image_version(
                "imagectl-images", "imagectl_gallery", STACK, "2026.1.1", location="eastus"
            )
            yield Account(cloud, workspace_copy, fake, apis, monkeypatch)


def doctor_at(cli: Any, root: Path, cloud: str, *extra: str) -> Any:
    return cli("--root", str(root), "doctor", "--stack", STACK, "--cloud", cloud, *extra)


def doctor(cli: Any, account: Account, *extra: str) -> Any:
    return doctor_at(cli, account.root, account.cloud, *extra)


def _run(cli: Any, account: Account, doc: Any, *extra: str) -> Any:
    ctx = account.grant(doc)
    if ctx is None:
        return doctor(cli, account, *extra)
    with ctx:
        return doctor(cli, account, *extra)


def lines(result: Any, status: str) -> list[str]:
    return [ln for ln in result.out.splitlines() if ln.startswith(status)]


def test_green_under_exactly_the_build_and_validate_documents(cli: Any, account: Account) -> None:
    result = _run(cli, account, merged(account.cloud), "--runner-cidr", RUNNER)
    assert result.code == 0, result.out + result.err
    assert lines(result, "blocker") == []
    checks = {ln.split()[1] for ln in lines(result, "ok")}
    assert {"credentials", "permissions", "quota", "runner"} <= checks, result.out
    assert f"ready: {STACK} on {account.cloud}" in result.out


MISSING = {
    "aws": "ec2:RunInstances",
    "gcp": "compute.instances.create",
    "azure": "Microsoft.Compute/virtualMachines/write",
}


def test_a_missing_permission_is_named_with_its_document(cli: Any, account: Account) -> None:
    doc = perm.without(account.cloud, merged(account.cloud), MISSING[account.cloud])
    result = _run(cli, account, doc, "--runner-cidr", RUNNER)
    assert result.code == 1, result.out + result.err
    (line,) = [ln for ln in lines(result, "blocker") if MISSING[account.cloud] in ln]
    assert f"images/permissions/{account.cloud}/validate." in line and "add it" in line


def test_zero_gpu_quota_is_a_blocker_with_the_request_to_make(cli: Any, account: Account) -> None:
    account.zero_quota()
    result = _run(cli, account, merged(account.cloud), "--runner-cidr", RUNNER)
    assert result.code == 1, result.out
    (line,) = [ln for ln in lines(result, "blocker") if " quota " in f" {ln} "]
    assert "needs" in line and ("increase" in line or "request" in line), line


def test_hosts_is_the_count_the_quota_must_hold(cli: Any, account: Account) -> None:
    """``--hosts N``: the quota check asks for N instances of each validation shape; the
    account that holds one (the green case above) does not hold 64."""
    with account.grant(merged(account.cloud)) or contextlib.nullcontext():
        one = doctor_at(cli, account.root, account.cloud, "--runner-cidr", RUNNER)
        many = doctor_at(cli, account.root, account.cloud, "--runner-cidr", RUNNER,
                         "--hosts", "64")  # fmt: skip
    assert one.code == 0 and not [ln for ln in lines(one, "blocker") if " quota " in f" {ln} "]
    assert many.code == 1, many.out
    (line,) = [ln for ln in lines(many, "blocker") if " quota " in f" {ln} "]
    assert "needs" in line, line


@pytest.mark.parametrize("cidr", [None, "10.1.2.3/32"], ids=["none", "private"])
def test_no_or_unreachable_runner_address(cli: Any, account: Account, cidr: str | None) -> None:
    extra = ("--runner-cidr", cidr) if cidr else ()
    result = _run(cli, account, merged(account.cloud), *extra)
    assert result.code == 1
    (line,) = [ln for ln in lines(result, "blocker") if " runner " in ln]
    assert "checkip" in line, line


def test_a_missing_gallery(cli: Any, workspace_copy: Path, monkeypatch) -> None:
    own_ids(workspace_copy)
    with FakeAzureArm(subscription=SUBSCRIPTION) as fake:
        monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", fake.endpoint)
        apis = ArmDoctorApis(fake, groups={"imagectl-build", "imagectl-images"})
        apis.usages["standardNDSH100v5Family"] = (96, 0)
        result = doctor_at(cli, workspace_copy, "azure", "--runner-cidr", RUNNER)
    assert result.code == 1, result.out
    (line,) = [ln for ln in result.out.splitlines() if "gallery imagectl_gallery" in ln]
    assert line.startswith("blocker") and "az sig create --resource-group imagectl-images" in line


def test_a_missing_resource_group(cli: Any, workspace_copy: Path, monkeypatch) -> None:
    own_ids(workspace_copy)
    with FakeAzureArm(subscription=SUBSCRIPTION) as fake:
        monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", fake.endpoint)
        ArmDoctorApis(fake, groups={"imagectl-images"})
        result = doctor_at(cli, workspace_copy, "azure", "--runner-cidr", RUNNER)
    assert result.code == 1
    assert any(
        "resource group imagectl-build does not exist" in ln and "az group create" in ln
        for ln in lines(result, "blocker")
    ), result.out


def test_a_placeholder_subscription(cli: Any, monkeypatch) -> None:
    """The shipped stack (an example) carries the nil subscription: a blocker on any
    account."""
    with FakeAzureArm() as fake:
        monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", fake.endpoint)
        ArmDoctorApis(fake, groups={"imagectl-build", "imagectl-images"})
        result = cli("doctor", "--stack", STACK, "--cloud", "azure", "--runner-cidr", RUNNER)
    assert result.code == 1
    (line,) = [ln for ln in lines(result, "blocker") if "subscription_id" in ln]
    assert "all-zero subscription" in line and "az account show" in line


def test_build_refuses_placeholders_before_any_cloud_call(
    cli: Any, workspace_copy: Path, monkeypatch
) -> None:
    """A stack that does not say it is an example and carries documentation ids: the build
    stops at once, exit 2, naming each (as lint does); nothing is called."""
    path = workspace_copy / "images" / "stacks" / f"{STACK}.yaml"
    path.write_text(path.read_text().replace("example: true", "example: false"))
    monkeypatch.delenv("IMAGECTL_AZURE_ENDPOINT", raising=False)
    result = cli("--root", str(workspace_copy), "build", "--stack", STACK, "--cloud", "azure")
    assert result.code == 2, result.out + result.err
    assert "all-zero subscription" in result.err and "imagectl doctor" in result.err


def test_validate_image_refuses_an_unreachable_runner_before_any_cloud_call(
    cli: Any, monkeypatch
) -> None:
    monkeypatch.delenv("IMAGECTL_GCP_ENDPOINT", raising=False)
    result = cli(
        "validate-image",
        "img-1",
        "--cloud",
        "gcp",
        "--stack",
        STACK,
        "--runner-cidr",
        "192.168.1.20/32",
    )
    assert result.code == 2, result.out + result.err
    assert "not an internet address" in result.err
