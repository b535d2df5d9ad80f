"""What one validation run is asked to do (``ValidationRequest``: the image, its shape and
expectations, how many hosts, timeouts, SSH and the inventory override) and the Ansible
variables of one of its hosts (``host_vars``)."""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass
from pathlib import Path

from imagectl.clouds.base import CloudImage, Instance
from imagectl.validation.inventory import ANSIBLE_LOCAL, InventoryOverride
from imagectl.validation.toolkit import ships_to
from imagectl.validators.expectations import Expectations


@dataclass
class ValidationRequest:
    image: CloudImage
    stack: str
    stack_digest: str
    shape: str
    # The image's expectations on this shape (imagectl.stacks.expectations.for_shape): the
    # hosts validate against this file (--expect), never by resolving the stack themselves.
    expect: Expectations
    hosts: int = 1
    profile: str = "quick"
    ttl: dt.timedelta = dt.timedelta(hours=3)
    locations: list[str] | None = None
    max_host_retries: int = 2
    reach_timeout_s: float = 900.0
    validator_timeout_s: float = 1800.0
    allowed_cidr: str | None = None
    # the cloud's login user (CloudSpec.login_user): who the launch gave the run's key to
    ssh_user: str = "root"
    ssh_private_key: str | None = None
    ssh_public_key: str | None = None
    launched_by: str = "imagectl"
    override: InventoryOverride | None = None
    wheel: str = ""
    playbook: Path | None = None
    sandbox: bool = False  # replaying hosts mark their receipts as sandbox replays
    # the GPU toolkit's wheelhouse the hosts install for the run ("": none; see
    # imagectl.validation.toolkit)
    toolkit_wheelhouse: str = ""
    # > 1: the hosts are launched in the cloud's placement and, once each passed on its own,
    # validated together (imagectl.validation.fabric): ``hosts`` is the node count then
    nodes: int = 1


def host_vars(
    inst: Instance, slot: int, req: ValidationRequest, workdir: Path
) -> dict[str, object]:
    """One host's Ansible inventory variables (the inventory file is their JSON edge)."""
    override: dict[str, object] = req.override.for_slot(slot) if req.override else {}
    if override.get("ansible_connection") == ANSIBLE_LOCAL:
        out: dict[str, object] = {
            "ansible_python_interpreter": sys.executable,
            "validate_imagectl": str(Path(sys.executable).parent / "imagectl"),
            # Hosts share this machine: one work folder per host.
            "validate_remote_dir": str(workdir / "hosts" / inst.instance_id),
        }
    else:
        out = {
            "ansible_host": inst.address or inst.instance_id,
            "ansible_port": inst.ssh_port,
            "ansible_user": req.ssh_user,
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=accept-new "
            "-o UserKnownHostsFile=/dev/null",
            # the validator reads root-only state (the kernel log under dmesg_restrict,
            # DCGM): a cloud's login user runs it through sudo, as the cloud set it up
            "validate_become": req.ssh_user != "root",
        }
        if req.ssh_private_key:
            out["ansible_ssh_private_key_file"] = req.ssh_private_key
    if req.toolkit_wheelhouse and ships_to(req.override, slot):
        out["validate_toolkit_wheelhouse"] = req.toolkit_wheelhouse
    out.update(override)
    return out
