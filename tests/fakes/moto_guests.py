"""EC2 instances that boot: moto's RunInstances / TerminateInstances with a ``GuestHost``.

``attach(host)`` makes every instance moto runs from then on (in process under
``mock_aws`` and through ``ThreadedMotoServer`` alike: both answer through moto's response
classes, which ``install()`` extends) boot a QEMU guest; ``detach()`` (and
``moto_extensions.BEHAVIOUR.reset()``'s callers: the fixtures) go back to instances that
never boot. What the emulator applies is EC2's, not imagectl's:

- **Who can log in.** EC2 gives the launch's key pair (``KeyName``) to the AMI's default
  user: "The default username for your EC2 instance is determined by the AMI that was
  specified when you launched the instance [...] For a Debian AMI, the username is
  admin [...] For an Ubuntu AMI, the username is ubuntu [...] For an Amazon Linux AMI,
  the username is ec2-user" (EC2 User Guide, "Manage system users on your Amazon EC2
  Linux instance", Default usernames). The emulator derives the AMI's OS the way a real
  AMI carries it, from its lineage: an AMI owned by its publisher's account (``OWNERS``:
  Canonical 099720109477, Debian 136693071363, Amazon 137112412989 / alias ``amazon``)
  has that publisher's user; an AMI made by CreateImage from an instance has the user of
  the AMI that instance ran (Packer's amazon-ebs builds so); a CopyImage copy has its
  source's. An AMI of no known lineage (RegisterImage from a snapshot) has no user the
  emulator could know: nobody can log in, unless a test says what OS it holds with
  ``GUESTS.default_users[ami_id] = "ubuntu"``.
  The keys in a ``#cloud-config`` user data's ``ssh_authorized_keys`` go to the same
  user: that is cloud-init's doing in those images ("ssh_authorized_keys: [...] keys
  [...] added to the default user", cloud-init docs, module "SSH", on Ubuntu, Debian
  and Amazon Linux AMIs alike). Root never gets a key (the images' cloud-init
  ``disable_root``).
- **Who can connect.** The instance's security groups, read at each connection: an
  ingress rule for TCP (or all protocols) whose port range holds 22 and whose
  ``CidrIp`` holds the runner's address ("Security group rules [...] The rules of a
  security group control the inbound traffic that's allowed to reach the instances",
  EC2 User Guide, "Security group rules"; a group with no rule admits nothing). An
  instance that is not ``running`` admits nobody.
- **Where.** The public IP moto assigns (default subnets map one) becomes the guest's
  ``127.0.0.N`` (``PublicIpAddress``); an instance without a public IP boots but no
  one outside its VPC reaches it, until an Elastic IP is associated with its primary
  interface (AssociateAddress), which then becomes the guest's address. Its groups are
  its own and its interfaces' (an EFA launch names them per interface).
- TerminateInstances stops the guest (its ``shutting-down`` phase included: the OS is
  going away). Stop/Start are not emulated for guests.
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass, field
from typing import Any

import yaml

from tests.fakes.guests import GuestHost, cidr_admits

# AMI owner account (or alias) -> the default user of that publisher's images.
OWNERS = {
    "099720109477": "ubuntu",  # Canonical (Ubuntu)
    "136693071363": "admin",  # Debian
    "137112412989": "ec2-user",  # Amazon Linux
    "amazon": "ec2-user",
}


@dataclass
class Guests:
    host: GuestHost | None = None
    default_users: dict[str, str] = field(default_factory=dict)  # AMI id -> user (tests)
    instance_users: dict[str, str | None] = field(default_factory=dict)  # at launch
    addresses: dict[str, str] = field(default_factory=dict)  # instance -> its guest's 127.0.0.N
    lock: threading.RLock = field(default_factory=threading.RLock)


GUESTS = Guests()


def attach(host: GuestHost) -> None:
    install()
    GUESTS.host = host
    GUESTS.default_users.clear()
    GUESTS.instance_users.clear()
    GUESTS.addresses.clear()


def detach() -> None:
    GUESTS.host = None


def default_user(backend: Any, ami_id: str, depth: int = 0) -> str | None:
    """The AMI's default user from its lineage (see the module docstring)."""
    if ami_id in GUESTS.default_users:
        return GUESTS.default_users[ami_id]
    ami = backend.amis.get(ami_id)
    if ami is None or depth > 16:
        return None
    user = OWNERS.get(str(ami.owner_id)) or OWNERS.get(str(getattr(ami, "owner_alias", "")))
    if user:
        return user
    instance = getattr(ami, "instance", None)  # CreateImage
    if instance is not None:
        if instance.id in GUESTS.instance_users:
            return GUESTS.instance_users[instance.id]
        return default_user(backend, instance.image_id, depth + 1)
    source = getattr(ami, "source_image_id", None)  # CopyImage (moto_extensions.copy_image)
    if source:
        from moto.ec2.models import ec2_backends

        region = getattr(ami, "source_image_region", None) or backend.region_name
        return default_user(ec2_backends[backend.account_id][region], source, depth + 1)
    return None


def user_data_keys(raw: str | None) -> list[str]:
    """``ssh_authorized_keys`` of a ``#cloud-config`` user data (base64 on the wire)."""
    if not raw:
        return []
    try:
        text = base64.b64decode(raw, validate=False).decode()
    except (ValueError, UnicodeDecodeError):
        text = str(raw)
    if not text.lstrip().startswith("#cloud-config"):
        return []
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return []
    keys = doc.get("ssh_authorized_keys") or [] if isinstance(doc, dict) else []
    return [str(k).strip() for k in keys if str(k).strip()]


def _admits(backend: Any, instance_id: str) -> Any:
    def admits(peer: str) -> bool:
        instance = next((i for i in backend.all_instances() if i.id == instance_id), None)
        if instance is None or instance._state.name != "running":
            return False
        if not (instance.nics and instance.nics[0].public_ip):  # no public address (yet)
            return False
        # the instance's groups and its interfaces' (an EFA launch names them per interface)
        groups = list(instance.security_groups or []) + [
            g for nic in instance.nics.values() for g in nic.group_set or []
        ]
        for group in groups:
            group_id = getattr(group, "id", group)
            current = backend.get_security_group_from_id(group_id)
            for rule in getattr(current, "ingress_rules", []) if current else []:
                protocol = str(rule.ip_protocol)
                ssh = protocol == "-1" or (
                    protocol == "tcp" and rule.from_port is not None
                    and rule.from_port <= 22 <= rule.to_port
                )  # fmt: skip
                if ssh and cidr_admits(rule.cidr_ipv4, peer):
                    return True
        return False

    return admits


def _boot(response: Any, instances: list[Any]) -> None:
    host = GUESTS.host
    if host is None:
        return
    backend = response.ec2_backend
    key_name = response._get_param("KeyName")
    keys: list[str] = []
    if key_name:
        pair = backend.key_pairs.get(key_name)
        if pair is not None:
            keys.append(pair.public_key.strip())
    keys += user_data_keys(response._get_param("UserData"))
    for instance in instances:
        user = default_user(backend, instance.image_id)
        with GUESTS.lock:
            GUESTS.instance_users[instance.id] = user
        logins = [(user, k) for k in keys] if user and user != "root" else []
        public = instance.nics[0].public_ip if instance.nics else None
        address = host.boot(instance.id, logins=logins, admits=_admits(backend, instance.id))
        with GUESTS.lock:
            GUESTS.addresses[instance.id] = address
        if public:
            instance.nics[0].public_ip = address


def install() -> None:
    """Wrap (moto_extensions' or moto's own) RunInstances and TerminateInstances once."""
    from moto.ec2.responses.instances import InstanceResponse

    if getattr(InstanceResponse, "_imagectl_guests", False):
        return
    run = InstanceResponse.run_instances
    terminate = InstanceResponse.terminate_instances

    def run_instances(self: Any) -> Any:
        result = run(self)
        if GUESTS.host is not None:
            _boot(self, list(result.result.instances))
        return result

    def terminate_instances(self: Any) -> Any:
        result = terminate(self)
        host = GUESTS.host
        if host is not None:
            for instance_id in self._get_param("InstanceIds", []):
                host.stop(instance_id)
        return result

    InstanceResponse.run_instances = run_instances  # type: ignore[method-assign]
    InstanceResponse.terminate_instances = terminate_instances  # type: ignore[method-assign]
    InstanceResponse._imagectl_guests = True  # type: ignore[attr-defined]

    from moto.ec2.responses.elastic_ip_addresses import ElasticIPAddresses

    associate = ElasticIPAddresses.associate_address

    def associate_address(self: Any) -> Any:
        """An Elastic IP associated with a guest's primary interface makes the guest
        reachable there (an instance with several interfaces has no other public
        address): the address becomes the guest's 127.0.0.N."""
        result = associate(self)
        eni_id = self._get_param("NetworkInterfaceId")
        if GUESTS.host is None or not eni_id:
            return result
        eni = self.ec2_backend.get_network_interface(eni_id)
        instance = getattr(eni, "instance", None)
        with GUESTS.lock:
            address = GUESTS.addresses.get(getattr(instance, "id", ""))
        if address and instance is not None and instance.nics.get(0) is eni:
            eni.public_ip = address
        return result

    ElasticIPAddresses.associate_address = associate_address  # type: ignore[method-assign]
