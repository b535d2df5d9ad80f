"""A multi-node ValidationRun's side of the fabric: its placement (created before the first
launch, deleted after the last termination) and the fabric phase over its live hosts,
turned into the run's decision."""

from __future__ import annotations

import secrets
from pathlib import Path

from imagectl.clouds.base import Instance, Provider
from imagectl.clouds.placement import Placement
from imagectl.validation.decide import INCONCLUSIVE, VALIDATED, BadHost, Decision
from imagectl.validation.fabric.attribution import FABRIC, NODE
from imagectl.validation.fabric.measure import Node
from imagectl.validation.fabric.phase import FabricOutcome, fabric_phase
from imagectl.validation.fabric.receipt import FabricSubject
from imagectl.validation.request import ValidationRequest, host_vars


def placement_name(stack: str) -> str:
    """Valid on every cloud: lowercase letters, digits and hyphens, a letter first, <= 63."""
    return f"imagectl-{stack}-{secrets.token_hex(4)}"[:63]


def create_placement(
    provider: Provider, req: ValidationRequest, location: str, tags: dict[str, str]
) -> Placement | None:
    return provider.create_placement(
        name=placement_name(req.stack), location=location, shape=req.shape,
        count=req.nodes, tags=tags,
    )  # fmt: skip


def nodes_of(live: dict[int, Instance], req: ValidationRequest, workdir: Path) -> list[Node]:
    """The run's hosts as fabric nodes, slot order: each at its private address (the
    inventory override's ``fabric_address`` first: test mode), with the host's own
    variables and the run's toolkit for the collectives (``fabric_toolkit_wheelhouse``,
    ``fabric_device`` and ``fabric_max_bytes`` in the override replace the run's)."""
    out = []
    for slot, inst in sorted(live.items()):
        hv = host_vars(inst, slot, req, workdir)
        hv.setdefault("fabric_toolkit_wheelhouse", req.toolkit_wheelhouse)
        hv.setdefault("fabric_device", "auto")
        hv.setdefault("fabric_max_bytes", 0)
        address = hv.get("fabric_address") or inst.private_address or inst.address
        out.append(Node(inst.instance_id, str(address or inst.instance_id), hv))
    return out


def run_fabric(
    live: dict[int, Instance],
    req: ValidationRequest,
    workdir: Path,
    expect_file: Path,
    placement: Placement | None,
    cloud: str,
) -> FabricOutcome:
    nodes = nodes_of(live, req, workdir)
    hw = req.expect.hardware
    fabric = hw.nics.fabric if hw is not None and hw.nics is not None else None
    return fabric_phase(
        nodes,
        {n.node: [] for n in nodes},  # every node passed its own validation to get here
        FabricSubject(req.image.image_id, req.stack, req.stack_digest, req.shape, cloud,
                      req.profile),
        fabric=fabric,
        placement=placement.to_dict() if placement else None, expect_file=expect_file,
        timeout_s=req.validator_timeout_s,
    )  # fmt: skip


def fabric_decision(outcome: FabricOutcome, hosts_passed: Decision) -> Decision:
    """Validated only when the fabric run passed too; a node or the fabric at fault is
    inconclusive (not the image's fault: hardware or the placement), naming who."""
    att = outcome.attribution
    why = "; ".join(att.reasons)
    if att.verdict == NODE:
        check = ("fabric.attribution",)
        bad = [BadHost(host=n, instance_id=n, failed_checks=check, hardware=check, image_level=())
               for n in att.nodes]  # fmt: skip
        nodes = ", ".join(att.nodes)
        return Decision(INCONCLUSIVE, [f"across nodes: node(s) {nodes} at fault: {why}"],
                        bad_hosts=bad)  # fmt: skip
    if att.verdict == FABRIC:
        return Decision(INCONCLUSIVE, [f"across nodes: the fabric is at fault: {why}"])
    return Decision(VALIDATED, [*hosts_passed.reasons, *att.reasons])
