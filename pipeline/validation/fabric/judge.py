"""One collective run across nodes, judged: every node's measurements (``imagectl
collectives`` JSON) joined into a verdict per collective.

The bus bandwidth of the run is the slowest node's (each node times its own ranks; busbw
already uses the global world size), judged against the interconnect's floor
(``validators/data/interconnect_floors.yaml``). Values that came back wrong, a rank that
died or hung, or a node that sent nothing fail the run whatever the bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from imagectl.validators.collectives.interconnect import BusbwVerdict, Interconnect, judge_busbw


@dataclass(frozen=True)
class NodeRun:
    """What one node sent back (``result`` None: nothing, with ``problem`` saying why)."""

    node: str  # the instance id
    address: str
    result: dict[str, object] | None = None  # the node's ``imagectl collectives`` JSON
    problem: str | None = None

    def check(self, check_id: str) -> NodeCheck | None:
        """The node's result of one check (None: it sent none)."""
        checks = (self.result or {}).get("checks")
        for c in checks if isinstance(checks, list) else []:
            if isinstance(c, dict) and c.get("id") == check_id:
                return NodeCheck.of(c)
        return None


@dataclass(frozen=True)
class NodeCheck:
    """The fields of one check result (``validators.results.CheckResult``'s JSON) that
    judging a run reads."""

    id: str
    outcome: str | None
    message: str
    measured: float | None
    details: dict[str, object]

    @classmethod
    def of(cls, c: dict[str, object]) -> NodeCheck:
        measured, details = c.get("measured"), c.get("details")
        return cls(
            id=str(c.get("id")),
            outcome=str(c["outcome"]) if c.get("outcome") is not None else None,
            message=str(c.get("message") or ""),
            measured=float(measured) if isinstance(measured, (int, float, str)) else None,
            details=dict(details) if isinstance(details, dict) else {},
        )


@dataclass(frozen=True)
class RunVerdict:
    """A run's verdict: ``ok``, the collective busbw (slowest node), why not ok, which
    nodes the run itself names (never joined, died, sent nothing)."""

    nodes: tuple[str, ...]
    ok: bool
    busbw_gbps: float | None
    floor: BusbwVerdict | None
    reasons: list[str] = field(default_factory=list)
    named_nodes: list[str] = field(default_factory=list)
    per_node: dict[str, dict[str, object]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "nodes": list(self.nodes),
            "ok": self.ok,
            "busbw_gbps": self.busbw_gbps,
            "floor_gbps": self.floor.floor_gbps if self.floor else None,
            "floor": self.floor.why if self.floor else None,
            "floor_source": self.floor.source if self.floor else None,
            "reasons": self.reasons,
            "named_nodes": self.named_nodes,
            "per_node": self.per_node,
        }


def judge_run(runs: list[NodeRun], ic: Interconnect, op: str = "all_reduce") -> RunVerdict:
    nodes = tuple(r.node for r in runs)
    reasons: list[str] = []
    named: list[str] = []
    per_node: dict[str, dict[str, object]] = {}
    busbws: list[float] = []
    slowest: dict[int, float] = {}  # bytes -> the slowest node's busbw at that size
    device = "cpu"
    for run in runs:
        if run.result is None:
            reasons.append(f"{run.node}: {run.problem or 'no result came back'}")
            named.append(run.node)
            continue
        device = str(run.result.get("device") or device)
        rdzv = run.check("collective.rendezvous")
        coll = run.check(f"collective.{op}")
        per_node[run.node] = {
            "address": run.address,
            "rendezvous": rdzv.outcome if rdzv else None,
            op: coll.outcome if coll else None,
            "busbw_gbps": coll.measured if coll else None,
            "nccl_env": run.result.get("nccl_env"),
            "interface": run.result.get("interface"),
        }
        for check in (rdzv, coll):
            if check is not None and check.outcome in ("fail", "error"):
                reasons.append(f"{run.node}: {check.id}: {check.message}".strip())
                if check is rdzv or check.details.get("failure") == "died":
                    named.append(run.node)
        if coll is None:
            reasons.append(f"{run.node}: no collective.{op} result")
        elif coll.measured is not None:
            busbws.append(float(coll.measured))
            sizes_measured = coll.details.get("sizes")
            for size in sizes_measured if isinstance(sizes_measured, list) else []:
                if not isinstance(size, dict):
                    continue
                got = float(size.get("busbw_gbps") or 0.0)
                key = int(size.get("bytes") or 0)
                slowest[key] = min(got, slowest.get(key, got))
    sizes = [{"bytes": b, "busbw_gbps": v} for b, v in sorted(slowest.items())]
    floor = judge_busbw(ic, op, sizes, device) if busbws else None
    if floor is not None and floor.ok is False:
        reasons.append(f"bus bandwidth across {len(runs)} nodes: {floor.why}")
    ok = not reasons and bool(busbws)
    return RunVerdict(nodes, ok, min(busbws) if busbws else None, floor, reasons,
                      sorted(set(named)), per_node)  # fmt: skip
