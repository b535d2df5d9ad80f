"""Emulated cloud instances boot: each cloud's emulator, given a ``GuestHost``, boots the
local candidate in QEMU for an instance the REAL provider launches, and applies that
cloud's login and network semantics (tests/fakes/guests.py, moto_guests.py,
gcp_compute.py, azure_arm.py). One boot per cloud (TCG: 30-60 s each):

- SSH as the cloud's user with the run's key works (AWS: the Canonical lineage's
  ``ubuntu``; GCP: the user the provider named in metadata ``ssh-keys``; Azure: the
  VM's ``osProfile.adminUsername``), and that user has passwordless sudo;
- SSH as another user with the same key is refused (``Permission denied``);
- once the cloud's rule no longer admits 127.0.0.1 (revoked / deleted / NSG rule
  changed, through the cloud's API), the connection is closed before SSH starts;
- terminating the instance stops its VM.

The guest image: ``IMAGECTL_GUEST_STATE_DIR`` (an ``imagectl run --stack local`` state
folder), else the e2e state folder (test_e2e.py, which runs before this module, leaves its
candidate there), else ``~/.local/state/imagectl``; none: skipped, but under CI=true
``imagectl run --stack local --json`` builds it in the e2e state folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from needs import in_ci, require_root, require_tool

from tests.fakes import moto_guests
from tests.fakes.azure_arm import FakeAzureArm
from tests.fakes.fixtures import CloudEnv, resolved_stack
from tests.fakes.gcp_compute import FakeGcpCompute
from tests.fakes.guest_launch import (
    CANONICAL,
    aws_candidate,
    launch,
    make_key,
    ssh,
    ssh_when_up,
)
from tests.fakes.guests import GuestHost, GuestImage, find_guest_image

pytestmark = pytest.mark.e2e
pytest_plugins = ["tests.fakes.fixtures"]
REPO = Path(__file__).resolve().parents[2]
BOOT_S = 300


@pytest.fixture(scope="module")
def guest_image(request: pytest.FixtureRequest) -> GuestImage:
    require_root()  # the forwarders listen on 127.0.0.N:22, as a cloud's SSH does
    for tool in ("qemu-system-x86_64", "qemu-img", "ssh", "ssh-keygen"):
        require_tool(tool)
    folders = [os.environ.get("IMAGECTL_GUEST_STATE_DIR"), os.environ.get("IMAGECTL_E2E_STATE_DIR"),
               str(Path.home() / ".local" / "state" / "imagectl")]  # fmt: skip
    for folder in filter(None, folders):
        found = find_guest_image(Path(folder))
        if found is not None:
            return found
    if not in_ci():
        pytest.skip("no local candidate: run `imagectl run --stack local` first")
    state: Path = request.getfixturevalue("e2e_state")
    found = find_guest_image(state)
    if found is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
        env.update(IMAGECTL_STATE_DIR=str(state), COLUMNS="160")
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "imagectl"), "--root", str(REPO), "run",
             "--stack", "local", "--json"],
            capture_output=True, text=True, env=env, timeout=2400, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        json.loads(proc.stdout)
        found = find_guest_image(state)
    assert found is not None, f"imagectl run left no candidate in {state}"
    return found


@pytest.fixture
def guest_host(guest_image: GuestImage, tmp_path: Path) -> Iterator[GuestHost]:
    host = GuestHost(guest_image, tmp_path / "guests")
    try:
        yield host
    finally:
        host.close()
        assert host._children.pids() == [], "a VM outlived its test"


def _check_logins(
    host: GuestHost, guest_id: str, key: Path, user: str, other: str, address: str
) -> None:
    ok = ssh_when_up(host, guest_id, key, user, address, BOOT_S)
    assert ok.returncode == 0, f"{ok.stderr}\n{host.guests[guest_id].serial_tail()}"
    assert ok.stdout.strip() == user
    assert ssh(key, user, address, "sudo -n id -un").stdout.strip() == "root"
    refused = ssh(key, other, address)
    assert refused.returncode == 255 and "Permission denied" in refused.stderr, refused


def _closed(key: Path, user: str, address: str) -> None:
    """The connection is closed before SSH's key exchange: not a login refusal."""
    result = ssh(key, user, address)
    assert result.returncode == 255, result
    assert "Permission denied" not in result.stderr, result.stderr
    assert any(w in result.stderr for w in ("closed", "reset", "Connection")), result.stderr


def _other(user: str) -> str:
    return "ubuntu" if user != "ubuntu" else "imagectl"


def test_aws_instance_boots_for_the_ami_default_user_behind_its_security_group(
    moto_server: str, guest_host: GuestHost, tmp_path: Path
) -> None:
    import boto3

    region = resolved_stack().stack.clouds.aws.build.region
    candidate = aws_candidate(CANONICAL, endpoint=moto_server)  # built before VMs boot
    moto_guests.attach(guest_host)
    try:
        key, public = make_key(tmp_path)
        provider = CloudEnv("aws", None).provider()
        inst = launch(provider, provider.get_image(candidate, region), region, public)
        inst = provider.wait_reachable(inst, timeout_s=60)  # running before SSH answers
        assert inst.address and inst.address.startswith("127.0.0.")
        _check_logins(guest_host, inst.instance_id, key, "ubuntu", "imagectl", inst.address)
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_server)
        (reservation,) = ec2.describe_instances(InstanceIds=[inst.instance_id])["Reservations"]
        (group,) = reservation["Instances"][0]["SecurityGroups"]
        ec2.revoke_security_group_ingress(
            GroupId=group["GroupId"],
            IpPermissions=[{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                            "IpRanges": [{"CidrIp": "127.0.0.1/32"}]}],
        )  # fmt: skip
        _closed(key, "ubuntu", inst.address)
        provider.terminate(inst)
        assert guest_host.guest(inst.instance_id) is None
    finally:
        moto_guests.detach()


@pytest.fixture
def gcp_booting(
    monkeypatch: pytest.MonkeyPatch, fast_polling: None, guest_host: GuestHost
) -> Iterator[FakeGcpCompute]:
    g = resolved_stack().stack.clouds.gcp
    region = g.build.zone.rsplit("-", 1)[0]
    fake = FakeGcpCompute(
        project=g.build.project, zones=tuple(f"{region}-{z}" for z in "abc"), guests=guest_host
    )
    with fake:
        monkeypatch.setenv("IMAGECTL_GCP_ENDPOINT", fake.endpoint)
        yield fake


def test_gcp_instance_boots_for_the_ssh_keys_user_behind_its_firewall_rule(
    gcp_booting: FakeGcpCompute, guest_host: GuestHost, tmp_path: Path
) -> None:
    env = CloudEnv("gcp", gcp_booting)
    key, public = make_key(tmp_path)
    provider = env.provider()
    inst = launch(provider, env.seed_candidate(), env.locations()[0], public)
    inst = provider.wait_reachable(inst, timeout_s=60)
    items = gcp_booting.instances[(inst.region, inst.instance_id)]["metadata"]["items"]
    user = next(i["value"] for i in items if i["key"] == "ssh-keys").split(":", 1)[0]
    guest_id = f"{inst.region}/{inst.instance_id}"
    _check_logins(guest_host, guest_id, key, user, _other(user), inst.address)
    (rule,) = gcp_booting.firewalls
    provider.clients.wait(
        provider.clients.firewalls.delete(project=provider.project, firewall=rule)
    )
    _closed(key, user, inst.address)
    provider.terminate(inst)
    assert guest_host.guest(guest_id) is None


@pytest.fixture
def azure_booting(
    monkeypatch: pytest.MonkeyPatch, fast_polling: None, guest_host: GuestHost
) -> Iterator[FakeAzureArm]:
    subscription = resolved_stack().stack.clouds.azure.build.subscription_id
    with FakeAzureArm(subscription=subscription, guests=guest_host) as fake:
        monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", fake.endpoint)
        yield fake  # type: ignore[misc]


def test_azure_vm_boots_for_its_admin_user_behind_its_nsg(
    azure_booting: FakeAzureArm, guest_host: GuestHost, tmp_path: Path
) -> None:
    env = CloudEnv("azure", azure_booting)
    key, public = make_key(tmp_path)
    provider = env.provider()
    inst = launch(provider, env.seed_candidate(), env.locations()[0], public)
    inst = provider.wait_reachable(inst, timeout_s=60)
    (vm,) = [r for r in azure_booting.resources.values() if r["type"].endswith("virtualMachines")]
    user = vm["properties"]["osProfile"]["adminUsername"]
    guest_id = azure_booting._key(vm["id"])
    _check_logins(guest_host, guest_id, key, user, _other(user), inst.address)
    _nsg_from_elsewhere(azure_booting, provider)
    _closed(key, user, inst.address)
    provider.terminate(inst)
    assert guest_host.guest(guest_id) is None


def _nsg_from_elsewhere(fake: FakeAzureArm, provider: Any) -> None:
    """The NSG's SSH rule, rewritten through ARM to admit another address only."""
    (nsg,) = [r for r in fake.resources.values() if r["type"].endswith("networkSecurityGroups")]
    rg = nsg["id"].split("/resourceGroups/")[1].split("/")[0]
    ops = provider.clients.network.network_security_groups
    current = ops.get(rg, nsg["name"])
    for rule in current.security_rules:
        rule.source_address_prefix = "203.0.113.7/32"
    ops.begin_create_or_update(rg, nsg["name"], current).result()
    (rule,) = fake.resources[fake._key(nsg["id"])]["properties"]["securityRules"]
    assert rule["properties"]["sourceAddressPrefix"] == "203.0.113.7/32"
