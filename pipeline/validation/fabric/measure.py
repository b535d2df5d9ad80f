"""One collective run across some of the run's nodes: playbooks/fabric.yml over them (each
runs ``imagectl collectives`` with the same hostfile), each node's JSON read back."""

from __future__ import annotations

import json
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from imagectl.validation.fabric.judge import NodeRun
from imagectl.validation.fanout import playbook_path, run_validate_playbook
from imagectl.validators.collectives.hostfile import DEFAULT_PORT
from imagectl.validators.collectives.launch import free_port

# Ansible's connection plugin that runs on the controller (the test mode), not a cloud
ANSIBLE_LOCAL = "local"


@dataclass(frozen=True)
class Node:
    """A node of the run: its instance id, its address on the fabric, its host vars."""

    node: str
    address: str
    host_vars: dict[str, object]

    @property
    def local(self) -> bool:
        return self.host_vars.get("ansible_connection") == ANSIBLE_LOCAL


def hostfile_text(addresses: list[str], port: int) -> str:
    """validators/collectives/hostfile.py's format: the first host is the rendezvous."""
    first, *rest = addresses
    return "".join([f"{first} port={port}\n", *(f"{a}\n" for a in rest)])


def measure(
    nodes: list[Node],
    *,
    expect_file: Path,
    profile: str,
    device: str = "auto",
    max_bytes: int = 0,
    timeout_s: float = 1800.0,
    playbook: Path | None = None,
) -> list[NodeRun]:
    """Run the collectives across ``nodes`` (two or more) and read each node's part."""
    # nodes on the controller itself (test mode) share its ports: a free one
    port = free_port() if all(n.local for n in nodes) else DEFAULT_PORT
    with tempfile.TemporaryDirectory(prefix="imagectl-fabric-") as tmp:
        results = Path(tmp)
        # per-host (the override may set them per slot): extra vars would outrank them
        defaults = {"fabric_device": device, "fabric_max_bytes": int(max_bytes)}
        hosts = {n.node: {**defaults, **n.host_vars, "fabric_address": n.address} for n in nodes}
        extravars = {
            "fabric_result_dir": str(results),
            "fabric_hostfile": hostfile_text([n.address for n in nodes], port),
            "fabric_expect": str(expect_file),
            "fabric_profile": profile if profile in ("quick", "full", "burn") else "quick",
            "fabric_rdzv_id": f"imagectl-fabric-{secrets.token_hex(4)}",
            "fabric_timeout_s": int(timeout_s),
        }
        fan = run_validate_playbook(
            hosts=hosts,
            extravars=extravars,
            timeout_s=timeout_s + 300,
            playbook=playbook or playbook_path().with_name("fabric.yml"),
        )
        out = []
        for n in nodes:
            path = results / f"{n.node}.json"
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                status = fan.host_status.get(n.node, "not run")
                why = fan.host_messages.get(n.node, "")
                out.append(NodeRun(n.node, n.address, None, f"no result ({status}): {why}"[:600]))
                continue
            if not isinstance(data, dict) or data.get("kind") != "imagectl.fabric-node":
                out.append(NodeRun(n.node, n.address, None, "the result is not a node's part"))
                continue
            out.append(NodeRun(n.node, n.address, data))
        return out
