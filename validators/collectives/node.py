"""One node's part of a multi-node collective run (``imagectl collectives --nodes FILE``).

``imagectl validate-image --nodes N`` runs this on every node of the run at once (after
each node's own validation): the same torchrun c10d path as ``validate --nodes``, limited
to the collectives the fabric is judged on, with the fabric's NCCL settings
(``interconnect.nccl_env_for``) and the socket interface that holds this node's hostfile
address (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME: bootstrap and gloo traffic go over the
fabric network, not the management NIC). The result is measurement only: the controller
joins every node's and judges them (``imagectl.validation.fabric``).
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import struct
import time
from typing import Any

from imagectl.core.errors import UserError
from imagectl.validators.collectives import _resolve_device, collective_checks
from imagectl.validators.collectives.arithmetic import size_sweep
from imagectl.validators.collectives.hostfile import parse_hostfile
from imagectl.validators.collectives.interconnect import nccl_env_for
from imagectl.validators.collectives.profiles import sweep_for

KIND = "imagectl.fabric-node"
SIOCGIFADDR = 0x8915  # linux/sockios.h


def interface_of(address: str) -> str | None:
    """The local interface whose IPv4 address is ``address`` (None: no such interface)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _index, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            with contextlib.suppress(OSError):
                answer = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)
                if socket.inet_ntoa(answer[20:24]) == address:
                    return name
    return None


def own_address(hosts: tuple[str, ...], given: str | None) -> str:
    """This node's entry in the hostfile: ``given``, else the one a local interface holds."""
    if given:
        if given not in hosts:
            raise UserError(
                f"--address {given} is not in the hostfile ({', '.join(hosts)})",
                hint="Pass the address this node has in the hostfile",
            )
        return given
    mine = [h for h in hosts if interface_of(h)]
    if len(mine) != 1:
        raise UserError(
            f"cannot tell which hostfile entry is this node ({', '.join(hosts)}): "
            f"{'none' if not mine else ', '.join(mine)} is held by a local interface",
            hint="Pass --address with this node's address in the hostfile",
        )
    return mine[0]


def run_node(
    expect: Any,
    *,
    nodes: str,
    address: str | None,
    profile: str,
    device: str,
    ops: list[str],
    max_bytes: int | None = None,
) -> dict[str, object]:
    """Run this node's ranks of the collectives across the hostfile; the node's result.
    ``max_bytes`` stops the profile's size sweep early (an emulated network)."""
    hostfile = parse_hostfile(nodes)
    addr = own_address(hostfile.hosts, address)
    device = _resolve_device(device, expect)
    sizes = None
    if max_bytes is not None:
        sweep = sweep_for(device, profile)
        sizes = size_sweep(sweep.min_bytes, min(max_bytes, sweep.max_bytes), sweep.factor)
    fabric = expect.hardware.nics.fabric if expect.hardware and expect.hardware.nics else None
    env = nccl_env_for(fabric)
    interface = interface_of(addr)
    if interface:
        env.setdefault("NCCL_SOCKET_IFNAME", interface)
        env["GLOO_SOCKET_IFNAME"] = interface
    started = time.monotonic()
    checks = collective_checks(
        expect, device=device, profile=profile, nodes=nodes, ops=ops, sizes=sizes,
        local_addr=addr, env=env,
    )  # fmt: skip
    return {
        "kind": KIND,
        "address": addr,
        "node_rank": hostfile.hosts.index(addr),
        "hostname": socket.gethostname(),
        "nodes": list(hostfile.hosts),
        "device": device,
        "interface": interface,
        "nccl_env": env,
        "duration_s": round(time.monotonic() - started, 3),
        "checks": [c.model_dump(mode="json") for c in checks],
    }
