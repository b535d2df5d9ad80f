"""The fabric receipt: the result of the collectives across a run's nodes, stored in the
catalog beside the nodes' own receipts (one row each), and judged by the promotion gate
where the stack's ``validation.nodes`` > 1.

It is a validator ``Receipt`` (the same schema, reader, binding and gate rules as a host's:
image id, stack digest, age, verdict) told apart by its host facts' ``role: fabric`` and
the catalog row's host ``fabric``. Its host facts record what the run was: the nodes
(instance, address), the placement the cloud put them in, the interconnect and the NCCL
settings every rank ran with; its expectations name the shape and the node count. Its
checks:

- ``fabric.collective.<op>``: values exact on every rank of every node, busbw (the
  slowest node's) against the interconnect's floor with its source;
- ``fabric.attribution``: pass, or who is at fault (``node``: the nodes, DRAIN; ``fabric``:
  the placement's network, DRAIN of the placement, not the image) with the reasons and the
  slow pairs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from imagectl import __version__
from imagectl.validation.fabric.attribution import FABRIC, NODE, PASS, Attribution
from imagectl.validation.fabric.judge import RunVerdict
from imagectl.validators.collectives.interconnect import Interconnect, policy
from imagectl.validators.coverage import Coverage
from imagectl.validators.receipt import Receipt, summarise, verdict_of
from imagectl.validators.registry import check_result
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

ROLE = "fabric"
HOST = "fabric"  # the catalog row's host column
ATTRIBUTION = "fabric.attribution"


@dataclass(frozen=True)
class FabricSubject:
    """What a fabric run validates: the image (its id, its stack and the stack digest it
    was built from) on ``shape`` in ``cloud``, with the validator ``profile``."""

    image_id: str
    stack: str
    stack_digest: str
    shape: str
    cloud: str
    profile: str


def is_fabric(receipt: Receipt) -> bool:
    return receipt.host.get("role") == ROLE


def nodes_of(receipt: Receipt) -> int:
    try:
        return int(receipt.expectations.get("nodes") or 0)
    except (TypeError, ValueError):
        return 0


def _collective(op: str, run: RunVerdict | None, ic: Interconnect) -> CheckResult:
    common: dict[str, object] = {
        "id": f"fabric.collective.{op}",
        "unit": "GB/s",
    }
    if run is None:
        return check_result(
            **common, severity=Severity.CRITICAL, outcome=Outcome.ERROR,
            message="the collectives across the nodes did not run",
        )  # fmt: skip
    floor = run.floor
    details = {**run.to_dict(), "interconnect": ic.name, "policy": policy()}
    return check_result(
        **common,
        severity=Severity.INFO if run.ok else Severity.CRITICAL,
        outcome=Outcome.PASS if run.ok else Outcome.FAIL,
        measured=run.busbw_gbps,
        expected=floor.floor_gbps if floor and floor.floor_gbps is not None else None,
        source=floor.source if floor and floor.source else None,
        message="; ".join(run.reasons)
        or (f"{len(run.nodes)} nodes: {floor.why}" if floor else f"{len(run.nodes)} nodes"),
        details=details,
    )


def _attribution(att: Attribution) -> CheckResult:
    ok = att.verdict == PASS
    who = {NODE: f"node(s) {', '.join(att.nodes)}", FABRIC: "the fabric"}.get(att.verdict, "")
    return check_result(
        id=ATTRIBUTION,
        severity=Severity.INFO if ok else Severity.CRITICAL,
        outcome=Outcome.PASS if ok else Outcome.FAIL,
        measured=att.verdict,
        action=Action.NONE if ok else Action.DRAIN,
        message="; ".join(att.reasons) if ok else f"{who}: {'; '.join(att.reasons)}",
        details=att.to_dict(),
    )


def fabric_receipt(
    subject: FabricSubject,
    *,
    nodes: list[dict[str, str]],
    placement: dict[str, object] | None,
    interconnect: Interconnect,
    nccl_env: dict[str, str],
    nccl_env_source: str | None,
    together: RunVerdict | None,
    attribution: Attribution,
    started: dt.datetime,
    op: str = "all_reduce",
) -> Receipt:
    finished = dt.datetime.now(dt.timezone.utc)
    checks = [_collective(op, together, interconnect), _attribution(attribution)]
    verdict, worst = verdict_of(checks)
    required = [c.id for c in checks]
    return Receipt(
        image_id=subject.image_id,
        stack=subject.stack,
        stack_digest=subject.stack_digest,
        validator_version=__version__,
        profile=subject.profile,
        started_at=started.isoformat(),
        finished_at=finished.isoformat(),
        duration_s=round((finished - started).total_seconds(), 3),
        mode="live",
        host={
            "role": ROLE,
            "nodes": nodes,
            "placement": placement,
            "interconnect": {
                "name": interconnect.name,
                "title": interconnect.title,
                "line_rate_gbps": interconnect.line_rate_gbps,
            },
            "nccl_env": nccl_env,
            "nccl_env_source": nccl_env_source,
        },
        expectations={"shape": subject.shape, "cloud": subject.cloud, "nodes": len(nodes)},
        gpus=[],
        checks=checks,
        coverage=Coverage(
            profile=subject.profile,
            shape_kind="multi-node",
            required=required,
            ran=[c.id for c in checks if c.outcome != Outcome.ERROR],
            not_run={c.id: c.message for c in checks if c.outcome == Outcome.ERROR},
        ),
        summary=summarise(checks),
        verdict=verdict,
        worst_action=worst,
    )
