"""The fabric phase of a multi-node validation run: after every node passed on its own,
the collectives across all of them; when that fails without naming a node and there are
three nodes or more, each node with its ring neighbour (pairs), so that a slow node is
told from a slow fabric (``attribution``). The result is the fabric receipt."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.validation.fabric.attribution import Attribution, attribute
from imagectl.validation.fabric.judge import NodeRun, RunVerdict, judge_run
from imagectl.validation.fabric.measure import Node, measure
from imagectl.validation.fabric.receipt import FabricSubject, fabric_receipt
from imagectl.validators.collectives.interconnect import (
    interconnect_for,
    nccl_env_for,
    nccl_env_source,
    pair_slow_fraction,
)
from imagectl.validators.receipt import Receipt

Measure = Callable[[list[Node]], list[NodeRun]]


@dataclass
class FabricOutcome:
    receipt: Receipt
    attribution: Attribution
    together: RunVerdict | None
    pairs: dict[tuple[str, str], RunVerdict] = field(default_factory=dict)


def ring_pairs(nodes: list[Node]) -> list[tuple[Node, Node]]:
    """Each node with the next (the last with the first): every node in two pairs."""
    if len(nodes) < 3:
        return []
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


def fabric_phase(
    nodes: list[Node],
    node_failures: Mapping[str, list[str]],
    subject: FabricSubject,
    *,
    fabric: str | None,
    placement: dict[str, object] | None,
    expect_file: Path,
    device: str = "auto",
    max_bytes: int = 0,
    timeout_s: float = 1800.0,
    measure_fn: Measure | None = None,
) -> FabricOutcome:
    started = dt.datetime.now(dt.timezone.utc)
    ic = interconnect_for(subject.shape)

    def run(group: list[Node]) -> list[NodeRun]:
        if measure_fn is not None:
            return measure_fn(group)
        return measure(group, expect_file=expect_file, profile=subject.profile, device=device,
                       max_bytes=max_bytes, timeout_s=timeout_s)  # fmt: skip

    together: RunVerdict | None = None
    pairs: dict[tuple[str, str], RunVerdict] = {}
    if not any(node_failures.get(n.node) for n in nodes):
        together = judge_run(run(nodes), ic)
        if not together.ok and not together.named_nodes:
            for a, b in ring_pairs(nodes):
                pairs[(a.node, b.node)] = judge_run(run([a, b]), ic)
    attribution = attribute(
        {n.node: list(node_failures.get(n.node) or []) for n in nodes},
        together,
        pairs,
        pair_fraction=pair_slow_fraction(),
    )
    env = nccl_env_for(fabric)
    if together is not None:  # what the ranks really ran with (the interface added)
        for info in together.per_node.values():
            ran = info.get("nccl_env")
            if isinstance(ran, dict) and ran:
                env = {str(k): str(v) for k, v in ran.items()}
            break
    receipt = fabric_receipt(
        subject,
        nodes=[{"instance_id": n.node, "address": n.address} for n in nodes],
        placement=placement, interconnect=ic, nccl_env=env,
        nccl_env_source=nccl_env_source(fabric), together=together, attribution=attribution,
        started=started,
    )  # fmt: skip
    if pairs:
        for check in receipt.checks:
            if check.id == "fabric.attribution":
                check.details["pairs"] = {f"{a}+{b}": v.to_dict() for (a, b), v in pairs.items()}
    return FabricOutcome(receipt, attribution, together, pairs)
