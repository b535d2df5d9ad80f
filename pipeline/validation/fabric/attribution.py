"""Who is at fault when collectives across nodes fail: a node, or the fabric. Pure.

The rules, in order (the first that holds decides):

1. **node, alone**: a node whose own validation failed (its receipt: single-host checks,
   the fabric checks on one host among them: EFA devices, IB ports, the NCCL net plugin)
   is at fault, whatever the run together did: it is named with the checks that failed.
2. **node, named by the run**: a node that never joined the rendezvous, whose ranks died,
   or that sent no result.
3. **pass**: the run across every node passed (values exact, busbw at or above the
   interconnect's floor).
4. **node, by its pairs** (three nodes or more, pairwise runs): a pair is slow when it
   failed, fell below the floor, or below ``pair_slow_fraction`` of the best pair's busbw;
   a node every one of whose pairs is slow, while some pair without it is not, is at
   fault.
5. **fabric**: every node healthy alone, slow or failing together, and no node explains
   it: the placement's network (a congested or misconfigured fabric, a placement that is
   not close enough), not the image and not one host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from imagectl.validation.fabric.judge import RunVerdict

PASS, NODE, FABRIC = "pass", "node", "fabric"


@dataclass(frozen=True)
class Attribution:
    verdict: str  # pass | node | fabric
    nodes: list[str] = field(default_factory=list)  # the nodes at fault (verdict node)
    reasons: list[str] = field(default_factory=list)
    slow_pairs: list[list[str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"verdict": self.verdict, "nodes": self.nodes, "reasons": self.reasons,
                "slow_pairs": self.slow_pairs}  # fmt: skip


def slow_pairs(
    pairs: Mapping[tuple[str, str], RunVerdict], fraction: float
) -> set[tuple[str, str]]:
    """The pairs that failed, fell below the floor, or below ``fraction`` x the best pair."""
    best = max((p.busbw_gbps or 0.0 for p in pairs.values()), default=0.0)
    return {
        key
        for key, p in pairs.items()
        if not p.ok or p.busbw_gbps is None or p.busbw_gbps < fraction * best
    }


def attribute(
    node_failures: Mapping[str, list[str]],
    together: RunVerdict | None,
    pairs: Mapping[tuple[str, str], RunVerdict] | None = None,
    *,
    pair_fraction: float = 0.8,
) -> Attribution:
    """``node_failures``: every node -> the ids of its own failed checks (empty: healthy,
    none: no receipt); ``together``: the run across every node (None: not run);
    ``pairs``: runs of two nodes each, keyed by the pair."""
    bad = {n: ids for n, ids in node_failures.items() if ids}
    if bad:
        why = [f"{n} failed its own checks: {', '.join(sorted(i))}" for n, i in sorted(bad.items())]
        return Attribution(NODE, sorted(bad), why)
    if together is None:
        return Attribution(FABRIC, [], ["the collectives across the nodes did not run"])
    if together.named_nodes:
        return Attribution(NODE, list(together.named_nodes), list(together.reasons))
    if together.ok:
        return Attribution(PASS, [], [f"{len(together.nodes)} nodes together: passed"])
    slow = slow_pairs(pairs or {}, pair_fraction)
    nodes = sorted(node_failures)
    culprits = []
    if pairs and len(nodes) >= 3:
        for node in nodes:
            mine = [k for k in pairs if node in k]
            others = [k for k in pairs if node not in k]
            if mine and all(k in slow for k in mine) and any(k not in slow for k in others):
                culprits.append(node)
    listed = [list(k) for k in sorted(slow)]
    if culprits:
        why = [f"{n}: every pair with it is slow, pairs without it are not" for n in culprits]
        return Attribution(NODE, culprits, why + list(together.reasons), listed)
    return Attribution(
        FABRIC, [],
        ["every node passed its own checks but the run across them failed: the fabric "
         "between them (placement, network), not one node", *together.reasons],
        listed,
    )  # fmt: skip
