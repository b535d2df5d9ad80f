"""The emulators' instance semantics with booting guests, without booting: each cloud's
own login rule (who the guest agent creates, with which key) and its network rule (who
reaches the public address, read at each connection), through the real providers.

The guest here is a banner server standing in for the VM's sshd behind the real
forwarder (``GuestHost._launch`` is the only part replaced): the tests that boot QEMU
are ``tests/embedded/test_e2e_validate_clouds.py``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import moto_guests
from tests.fakes.azure_arm import FakeAzureArm
from tests.fakes.fixtures import CloudEnv, azure_serving, gcp_serving, resolved_stack
from tests.fakes.gcp_compute import FakeGcpCompute
from tests.fakes.guest_launch import (
    CANONICAL,
    DEBIAN,
    ELSEWHERE,
    RUNNER,
    aws_candidate,
    banner,
    launch,
)
from tests.fakes.guests import GuestHost, GuestImage

pytest_plugins = ["tests.fakes.fixtures"]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGuestSemanticsKeyForTestsOnly guest-test"


class _Banner:
    """A TCP server that greets as sshd does; ``poll()`` like a process."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-banner\r\n")
            conn.close()

    def poll(self) -> int | None:
        return 0 if self.stopped else None

    def stop(self) -> None:
        self.stopped = True
        self.sock.close()


class BannerHost(GuestHost):
    def _launch(self, instance_id: str, overlay: Path, login_file: Path, serial: Path) -> Any:
        server = _Banner()
        return server, server.port, None  # a plain boot: no saved boot's hand-over

    def _halt(self, proc: Any) -> None:
        proc.stop()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[GuestHost]:
    image = GuestImage(tmp_path / "none.qcow2", tmp_path / "vmlinuz", tmp_path / "initrd")
    with BannerHost(image, tmp_path / "guests", port=0) as h:
        yield h
    assert h.guests == {}


def reach(host: GuestHost, address: str) -> bytes:
    guest = host.by_address(address)
    assert guest is not None, f"no guest at {address}"
    return banner(address, guest.forwarder.port)


# -- AWS ---------------------------------------------------------------------------------
@pytest.fixture
def aws(aws_moto: Any, host: GuestHost) -> Iterator[CloudEnv]:
    moto_guests.attach(host)
    try:
        yield CloudEnv("aws", aws_moto)
    finally:
        moto_guests.detach()


def _aws_launch(env: CloudEnv, owner: str, cidr: str = RUNNER) -> Any:
    provider = env.provider()
    region = resolved_stack().stack.clouds.aws.build.region
    image = provider.get_image(aws_candidate(owner), region)
    inst = launch(provider, image, region, KEY, cidr)
    # p5.48xlarge launches with its EFA interfaces, and EC2 gives an instance with several
    # interfaces no public address: it gets its Elastic IP once running, as the
    # validation stage waits for it (wait_reachable)
    return provider, provider.wait_reachable(inst, timeout_s=30)


def test_aws_key_goes_to_the_default_user_of_the_ami_lineage(aws: CloudEnv, host: GuestHost):
    provider, inst = _aws_launch(aws, CANONICAL)
    guest = host.guest(inst.instance_id)
    assert guest is not None and guest.logins == [("ubuntu", KEY)]
    assert inst.address == guest.address and inst.address.startswith("127.0.0.")
    assert reach(host, inst.address).startswith(b"SSH-")
    provider.terminate(inst)
    assert host.guest(inst.instance_id) is None


def test_aws_debian_lineage_is_admin_and_unknown_lineage_gets_no_login(aws, host):
    _, inst = _aws_launch(aws, DEBIAN)
    assert host.guests[inst.instance_id].logins == [("admin", KEY)]
    provider = aws.provider()
    unknown = aws.seed_candidate()  # RegisterImage: no publisher, no lineage
    region = resolved_stack().stack.clouds.aws.build.region
    other = launch(provider, unknown, region, KEY)
    assert host.guests[other.instance_id].logins == []
    for i in (inst, other):
        provider.terminate(i)


def test_aws_security_group_decides_at_each_connection(aws: CloudEnv, host: GuestHost):
    import boto3

    provider, inst = _aws_launch(aws, CANONICAL)
    assert reach(host, inst.address).startswith(b"SSH-")
    ec2 = boto3.client("ec2", region_name=resolved_stack().stack.clouds.aws.build.region)
    (reservation,) = ec2.describe_instances(InstanceIds=[inst.instance_id])["Reservations"]
    raw = reservation["Instances"][0]
    (group,) = raw["SecurityGroups"] or raw["NetworkInterfaces"][0]["Groups"]
    assert reservation["Instances"][0]["PublicIpAddress"] == inst.address
    ec2.revoke_security_group_ingress(
        GroupId=group["GroupId"],
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                        "IpRanges": [{"CidrIp": RUNNER}]}],
    )  # fmt: skip
    assert reach(host, inst.address) == b""
    assert host.guests[inst.instance_id].forwarder.refused == ["127.0.0.1"]
    provider.terminate(inst)


def test_aws_group_admitting_another_address_refuses_the_runner(aws, host):
    provider, inst = _aws_launch(aws, CANONICAL, ELSEWHERE)
    assert reach(host, inst.address) == b""
    provider.terminate(inst)


# -- GCP ---------------------------------------------------------------------------------
@pytest.fixture
def gcp(monkeypatch: pytest.MonkeyPatch, fast_polling: None, host: GuestHost) -> Iterator[Any]:
    with gcp_serving(monkeypatch, host) as fake:
        yield fake


def _gcp_launch(fake: FakeGcpCompute, cidr: str = RUNNER) -> tuple[Any, Any]:
    env = CloudEnv("gcp", fake)
    image = env.seed_candidate()
    provider = env.provider()
    inst = launch(provider, image, env.locations()[0], KEY, cidr)
    return provider, inst


def test_gcp_creates_the_user_named_in_ssh_keys(gcp: FakeGcpCompute, host: GuestHost):
    gcp.project_metadata["ssh-keys"] = "ubuntu:ssh-ed25519 AAAAprojectwide other"
    provider, inst = _gcp_launch(gcp)
    stored = gcp.instances[(inst.region, inst.instance_id)]["metadata"]["items"]
    (line,) = [i["value"] for i in stored if i["key"] == "ssh-keys"]
    user = line.split(":", 1)[0]
    guest = host.guest(f"{inst.region}/{inst.instance_id}")
    # the instance blocks project-wide keys: only its own line becomes a login
    assert guest is not None and guest.logins == [(user, KEY)]
    assert inst.address == guest.address
    assert reach(host, inst.address).startswith(b"SSH-")
    provider.terminate(inst)
    assert host.guests == {}


def test_gcp_firewall_rule_decides_at_each_connection(gcp: FakeGcpCompute, host: GuestHost):
    provider, inst = _gcp_launch(gcp)
    assert reach(host, inst.address).startswith(b"SSH-")
    (rule,) = gcp.firewalls.values()
    rule["targetTags"] = ["someone-else"]  # the rule no longer targets this instance
    assert reach(host, inst.address) == b""
    rule.pop("targetTags")  # no target: every instance of the network
    assert reach(host, inst.address).startswith(b"SSH-")
    gcp.firewalls["deny-all"] = {
        "name": "deny-all", "network": rule["network"], "priority": 10,
        "sourceRanges": ["0.0.0.0/0"], "denied": [{"IPProtocol": "all"}],
    }  # fmt: skip
    assert reach(host, inst.address) == b""
    provider.terminate(inst)


def test_gcp_rule_for_another_address_refuses_the_runner(gcp: FakeGcpCompute, host):
    provider, inst = _gcp_launch(gcp, ELSEWHERE)
    assert reach(host, inst.address) == b""
    provider.terminate(inst)


def test_gcp_os_login_of_the_project_is_turned_off_for_the_instance(
    gcp: FakeGcpCompute, host: GuestHost
):
    """Project metadata enable-oslogin=TRUE would make the guest ignore metadata ssh-keys
    ("About OS Login"); the validation instance's own enable-oslogin=FALSE overrides it,
    so the run's key still reaches its login."""
    gcp.project_metadata["enable-oslogin"] = "TRUE"
    provider, inst = _gcp_launch(gcp)
    assert [u for u, _ in host.guests[f"{inst.region}/{inst.instance_id}"].logins]
    provider.terminate(inst)


def test_gcp_organization_requiring_os_login_ignores_metadata_keys(
    gcp: FakeGcpCompute, host: GuestHost
):
    """constraints/compute.requireOsLogin wins over instance metadata: nobody can log in
    with the run's key (doctor reports it before any spend: test_doctor_gcp_policies.py)."""
    gcp.org_policies["constraints/compute.requireOsLogin"] = {"booleanPolicy": {"enforced": True}}
    provider, inst = _gcp_launch(gcp)
    assert host.guests[f"{inst.region}/{inst.instance_id}"].logins == []
    provider.terminate(inst)


# -- Azure -------------------------------------------------------------------------------
@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch, fast_polling: None, host: GuestHost) -> Iterator[Any]:
    with azure_serving(monkeypatch, host) as fake:
        yield fake


def _azure_launch(fake: FakeAzureArm, cidr: str = RUNNER) -> tuple[Any, Any, dict[str, Any]]:
    env = CloudEnv("azure", fake)
    image = env.seed_candidate()
    provider = env.provider()
    inst = launch(provider, image, env.locations()[0], KEY, cidr)
    (vm,) = [r for r in fake.resources.values() if r["type"].endswith("virtualMachines")]
    return provider, inst, vm


def test_azure_creates_the_admin_user_with_its_keys(azure: FakeAzureArm, host: GuestHost):
    provider, inst, vm = _azure_launch(azure)
    admin = vm["properties"]["osProfile"]["adminUsername"]
    guest = host.guest(azure._key(vm["id"]))
    assert guest is not None and guest.logins == [(admin, KEY)]
    assert inst.address == guest.address and inst.address.startswith("127.0.0.")
    assert reach(host, inst.address).startswith(b"SSH-")
    provider.terminate(inst)
    assert host.guests == {}


def test_azure_nsg_decides_at_each_connection(azure: FakeAzureArm, host: GuestHost):
    provider, inst, _ = _azure_launch(azure)
    assert reach(host, inst.address).startswith(b"SSH-")
    (nsg,) = [r for r in azure.resources.values() if r["type"].endswith("networkSecurityGroups")]
    (rule,) = nsg["properties"]["securityRules"]
    deny = {"name": "deny-first", "properties": {
        **rule["properties"], "priority": 50, "access": "Deny"}}  # fmt: skip
    nsg["properties"]["securityRules"].append(deny)
    assert reach(host, inst.address) == b""
    nsg["properties"]["securityRules"] = []  # DenyAllInBound
    assert reach(host, inst.address) == b""
    provider.terminate(inst)


def test_azure_rule_for_another_address_refuses_the_runner(azure: FakeAzureArm, host):
    provider, inst, _ = _azure_launch(azure, ELSEWHERE)
    assert reach(host, inst.address) == b""
    provider.terminate(inst)


def test_azure_refuses_a_key_path_outside_the_admins_home(azure: FakeAzureArm):
    import requests

    url = (f"{azure.endpoint}/subscriptions/{azure.subscription}/resourceGroups/rg/providers/"
           "Microsoft.Compute/virtualMachines/vm1?api-version=2024-03-01")  # fmt: skip
    body = {"location": "eastus", "properties": {"osProfile": {
        "adminUsername": "azureuser", "linuxConfiguration": {"ssh": {"publicKeys": [
            {"path": "/root/.ssh/authorized_keys", "keyData": KEY}]}}}}}  # fmt: skip
    answer = requests.put(url, json=body, timeout=10)
    assert answer.status_code == 400
    assert answer.json()["error"]["target"] == "linuxConfiguration.ssh.publicKeys.path"
    body["properties"]["osProfile"]["adminUsername"] = "root"
    assert requests.put(url, json=body, timeout=10).status_code == 400
