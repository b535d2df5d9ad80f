"""`imagectl build` (and `imagectl doctor`, which the build identity runs) on Google Cloud
and Azure under exactly the shipped build documents (images/permissions/<cloud>/build.*),
enforced by the Compute and ARM fakes (tests/fakes/permissions.py).

Packer's googlecompute and azure-arm builders cannot be pointed at the fakes, so Packer is
the stand-in of tests/fakes/packer_standin.py (``$IMAGECTL_PACKER``): it makes the
builder's one call that leaves the artifact (images.insert; the gallery version PUT).
What imagectl itself asks of the cloud around Packer runs for real: the base image
(images.getFromFamily; the marketplace versions), the gallery image definition
(prepare_build), then reading and tagging the artifact as built. Every entry of a build
document is needed by one of those runs or by the Packer builder
(images/permissions/builders.yaml, each entry with its source), and the document grants
every entry the builder needs; a build document missing one permission its build uses
fails the build naming it.

AWS's build runs the real amazon-ebs builder against moto under aws/build.json:
tests/clouds/test_aws_moto_server_e2e.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from imagectl.core.yamlfast import load_data
from tests.fakes import permissions as perm
from tests.fakes.doctor_apis import ArmDoctorApis, GcpDoctorApis
from tests.fakes.fixtures import resolved_stack

ROOT = Path(__file__).resolve().parents[2]
STACK = "h100-training"
BUILDERS = load_data(ROOT / "images" / "permissions" / "builders.yaml")
# What `imagectl build` itself asks (with the stand-in builder's artifact call)
BUILD_RUN = {
    "gcp": {
        "compute.disks.useReadOnly",  # builder: images.insert from the boot disk
        "compute.globalOperations.get",
        "compute.images.create",  # builder: images.insert
        "compute.images.get",
        "compute.images.getFromFamily",
        "compute.images.setLabels",
    },
    "azure": {
        "Microsoft.Compute/galleries/images/read",
        "Microsoft.Compute/galleries/images/versions/read",
        "Microsoft.Compute/galleries/images/versions/write",
        "Microsoft.Compute/galleries/images/write",
        "Microsoft.Compute/locations/capsOperations/read",  # the gallery writes' polls
        "Microsoft.Compute/locations/publishers/artifacttypes/offers/skus/versions/read",
    },
}
# Needed by `imagectl doctor` only when the stack names a validation reservation
ONLY_WITH_A_RESERVATION = {"gcp": {"compute.reservations.get"}, "azure": set()}


class Account:
    """One cloud's fake with what a build there finds: the base image and, on Azure, the
    gallery (which imagectl never creates) without the stack's image definition."""

    def __init__(self, cloud: str, fake: Any) -> None:
        self.cloud, self.fake = cloud, fake
        stack = resolved_stack().stack
        if cloud == "gcp":
            base = stack.clouds.gcp.base_image
            fake.add_image("ubuntu-2204-jammy-v20261101", family=base.family, project=base.project)
            self.apis: Any = GcpDoctorApis(fake, region="us-central1")
            self.apis.quotas["NVIDIA_H100_GPUS"] = (16.0, 0.0)
        else:
            az = stack.clouds.azure
            b = az.base_image
            fake.add_vm_image_version(az.build.location, b.publisher, b.offer, b.sku, "22.04.1")
            fake.add_gallery(az.gallery.resource_group, az.gallery.name)
            self.apis = ArmDoctorApis(fake, groups={az.build.resource_group,
                                                    az.gallery.resource_group})  # fmt: skip
            self.apis.usages["standardNDSH100v5Family"] = (192, 0)

    def enforced(self, monkeypatch: pytest.MonkeyPatch, doc: Any) -> Any:
        return perm.enforced(self.cloud, self.fake, monkeypatch, doc)

    def built(self) -> dict[str, str]:
        """The tags of the artifact the build left, as the cloud has them."""
        if self.cloud == "gcp":
            (image,) = [i for i in self.fake.images.values() if i["name"].startswith("imagectl-")]
            return dict(image.get("labels") or {})
        (version,) = [r for k, r in self.fake.resources.items() if "/versions/" in k]
        return dict(version.get("tags") or {})


@pytest.fixture(params=["gcp", "azure"])
def account(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Account:
    fake = request.getfixturevalue({"gcp": "gcp_fake", "azure": "azure_fake"}[request.param])
    packer = tmp_path / "packer"
    packer.write_text(f'#!/bin/sh\nexec "{sys.executable}" '
                      f'"{ROOT / "tests" / "fakes" / "packer_standin.py"}" "$@"\n')  # fmt: skip
    packer.chmod(0o755)
    monkeypatch.setenv("IMAGECTL_PACKER", str(packer))
    return Account(request.param, fake)


def _build(cli: Any, account: Account, tmp_path: Path) -> Any:
    return cli("build", "--stack", STACK, "--cloud", account.cloud, "--skip-provisioning",
               "--json", "--var-dir", str(tmp_path / "build"))  # fmt: skip


def test_build_and_doctor_under_exactly_the_build_document(
    cli: Any, account: Account, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud = account.cloud
    doc = perm.load_document(cloud, "build")
    with account.enforced(monkeypatch, doc) as run:
        result = _build(cli, account, tmp_path)
    assert result.code == 0, result.err[-3000:]
    assert run.refused == [] and run.unknown == [], (run.refused, run.unknown)
    (image,) = json.loads(result.out)["images"]
    assert image["state"] == "built"
    assert account.built().get("imagectl-state" if cloud == "gcp" else "imagectl:state") == "built"
    assert run.matched == BUILD_RUN[cloud], sorted(run.matched ^ BUILD_RUN[cloud])

    with account.enforced(monkeypatch, doc) as doctor:
        account.apis.enforcer = doctor
        checked = cli("doctor", "--stack", STACK, "--cloud", cloud, "--role", "build")
    # the shipped stack's example ids are the doctor's one blocker; every account check ran
    assert [ln.split()[1] for ln in checked.out.splitlines() if ln.startswith("blocker")] == [
        "placeholder"
    ], checked.out
    assert doctor.refused == [] and doctor.unknown == [], (doctor.refused, doctor.unknown)

    builder = set(BUILDERS[cloud]["permissions"])
    granted = set(perm.granted(cloud, doc))
    assert builder - granted == set(), f"{cloud}/build lacks what Packer's builder needs"
    unused = set(perm.unused(cloud, doc, run, doctor)) - builder - ONLY_WITH_A_RESERVATION[cloud]
    assert unused == set(), f"{cloud}/build grants what nothing needs: {sorted(unused)}"


@pytest.mark.parametrize(
    ("account", "permission"),
    [pytest.param(c, p, id=f"{c}-{p}") for c in ("gcp", "azure") for p in sorted(BUILD_RUN[c])],
    indirect=["account"],
)
def test_a_build_missing_one_permission_fails_naming_it(
    cli: Any, account: Account, permission: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = perm.without(account.cloud, perm.load_document(account.cloud, "build"), permission)
    with account.enforced(monkeypatch, doc) as run:
        result = _build(cli, account, tmp_path)
    assert permission in run.refused
    assert result.code != 0, result.out[-2000:]
    assert permission in result.err, result.err[-3000:]
