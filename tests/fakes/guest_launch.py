"""What the booting-instance tests share: a launch through the real provider of each
cloud, an AMI with a publisher lineage, and SSH / TCP probes of an instance's address.

Used by ``tests/clouds/test_guest_semantics.py`` (no VM: a banner server stands in for
sshd behind the real forwarder) and ``tests/embedded/test_e2e_validate_clouds.py`` (QEMU).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.fakes import fixtures
from tests.fakes.fixtures import resolved_stack
from tests.fakes.guests import GuestHost

CANONICAL = "099720109477"
DEBIAN = "136693071363"
RUNNER = "127.0.0.1/32"  # where the tests connect from (loopback peers are 127.0.0.1)
ELSEWHERE = "203.0.113.7/32"


def aws_candidate(owner: str = CANONICAL, *, endpoint: str | None = None) -> str:
    """An AMI built as Packer's amazon-ebs builds one: an instance of the publisher's base
    AMI (owned by ``owner``), then CreateImage from it. Returns the candidate's id."""
    import boto3
    from moto.ec2.models import ec2_backends

    region = resolved_stack().stack.clouds.aws.build.region
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
    base = ec2.register_image(
        Name="ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20261101",
        Architecture="x86_64",
        RootDeviceName="/dev/sda1",
    )["ImageId"]
    account = boto3.client("sts", region_name=region, endpoint_url=endpoint).get_caller_identity()
    ec2_backends[account["Account"]][region].amis[base].owner_id = owner  # the publisher's
    builder = ec2.run_instances(ImageId=base, InstanceType="t3.micro", MinCount=1, MaxCount=1)
    builder_id = builder["Instances"][0]["InstanceId"]
    image = ec2.create_image(InstanceId=builder_id, Name="imagectl-candidate")["ImageId"]
    ec2.terminate_instances(InstanceIds=[builder_id])
    tags = {"imagectl:stack": resolved_stack().name, "imagectl:stack-digest": "d" * 64}
    ec2.create_tags(Resources=[image], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    return str(image)


def launch(provider: Any, image: Any, location: str, key: str, cidr: str = RUNNER) -> Any:
    return fixtures.launch(
        provider, image, "p5.48xlarge", location, launched_by="guest-test",
        stack=resolved_stack().name, ssh_public_key=key, allowed_cidr=cidr,
    )  # fmt: skip


def banner(address: str, port: int, timeout: float = 10) -> bytes:
    """The first bytes the address answers on TCP (b"" when it closes at once)."""
    with socket.create_connection((address, port), timeout=timeout) as s:
        s.settimeout(timeout)
        try:
            return s.recv(64)
        except (ConnectionResetError, TimeoutError):
            return b""


def ssh(
    key: Path, user: str, address: str, command: str = "id -un"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "ConnectTimeout=15", "-o", "LogLevel=ERROR", f"{user}@{address}", command],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def ssh_when_up(
    host: GuestHost, instance_id: str, key: Path, user: str, address: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """SSH once the guest's sshd answers (the cloud reported it running long before)."""
    host.wait_sshd(instance_id, timeout)
    deadline = time.monotonic() + 60
    while True:  # sshd answers a moment before the login unit has run
        result = ssh(key, user, address)
        if result.returncode == 0 or time.monotonic() > deadline:
            return result
        time.sleep(2)


def make_key(folder: Path) -> tuple[Path, str]:
    key = folder / "id_ed25519"
    with contextlib.suppress(FileNotFoundError):
        key.unlink()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "guest-test", "-f", str(key)],
        check=True,
    )
    return key, key.with_suffix(".pub").read_text().strip()
