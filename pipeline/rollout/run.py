"""``rollout()``: read the fleet, decide, record, act (``imagectl rollout --stack S``).

1. The candidate is the image the stack's canary pointer names (``canary.py``); the
   predecessor the one its "latest" pointers name. Nodes are matched to either by the
   cloud image id in their ``imagectl_node_info`` (the source and every replica).
2. The fleet's evidence over the window (``evidence.py``: every launched node, reset-aware
   counters, validated values); Prometheus unreachable, failing or answering in part:
   **hold**. A gap in Prometheus's data (down, restarted) is time no look was recorded:
   it adds no exposure, so it never holds a window by itself.
3. The decision rule (``decide.py``, thresholds in ``policy.yaml``), at this candidate's
   look number: how many earlier recorded decisions tested it, plus one (the alpha
   spent per look, ``policy.sequential``).
4. The decision is recorded first (``rollout_decisions``: window, queries, per-shape
   numbers and tests; an ``rollout.decided`` event), then acted on unless ``dry_run``:
   **advance** promotes the candidate through ``promote`` (the same gate, copies and
   "latest" flip); **roll back** moves the canary pointer back and blocks the candidate
   with the evidence as its reason; **hold** changes nothing. What was done is recorded
   on the decision (``applied``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.models import Image, RolloutDecision
from imagectl.clouds.base import Provider
from imagectl.core.errors import UserError
from imagectl.promotion import block_image, promote
from imagectl.promotion import records as rec
from imagectl.promotion.groups import group_rows
from imagectl.rollout.canary import canary_back, canary_image
from imagectl.rollout.decide import ADVANCE, HOLD, ROLLBACK, ShapeDecision, decide
from imagectl.rollout.evidence import NodeEvidence, queries, read
from imagectl.rollout.policy import Policy, load_policy
from imagectl.rollout.prom import Prometheus, PrometheusUnavailable
from imagectl.stacks.resolve import ResolvedStack

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

DECIDED = "rollout.decided"
EXIT = {ADVANCE: 0, ROLLBACK: 1, HOLD: 3}


@dataclass
class RolloutResult:
    stack: str
    cloud: str
    decision: str
    reason: str
    window_s: int
    at: float
    candidate: str | None
    baseline: list[str]
    shapes: list[ShapeDecision] = field(default_factory=list)
    queries: dict[str, str] = field(default_factory=dict)
    applied: str = ""
    decision_id: int | None = None
    prometheus: str = ""
    look: int = 1
    alpha_spent: float = 0.0
    tested: bool = False
    launch_records: int | None = None
    nodes: list[NodeEvidence] = field(default_factory=list)  # every node read, per image

    @property
    def exit_code(self) -> int:
        return EXIT[self.decision]

    def to_dict(self) -> dict[str, object]:
        return {
            "stack": self.stack,
            "cloud": self.cloud,
            "decision": self.decision,
            "reason": self.reason,
            "window_s": self.window_s,
            "at": self.at,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "shapes": [s.to_dict() for s in self.shapes],
            "queries": self.queries,
            "prometheus": self.prometheus,
            "look": self.look,
            "alpha_spent": self.alpha_spent,
            "tested": self.tested,
            "launch_records": self.launch_records,
            "nodes": [n.to_dict() for n in self.nodes],
            "applied": self.applied,
            "decision_id": self.decision_id,
        }


def _ids(session: Session, image: Image) -> set[str]:
    return {r.cloud_image_id for r in group_rows(session, image)}


def _created(session: Session, image: Image) -> dict[str, float]:
    """When each copy of the image existed (the catalog's record): no node runs it earlier."""
    out = {}
    for r in group_rows(session, image):
        when = r.created_at if r.created_at.tzinfo else r.created_at.replace(tzinfo=dt.timezone.utc)
        out[r.cloud_image_id] = when.timestamp()
    return out


def rollout(
    catalog: Catalog,
    provider: Provider,
    stack: ResolvedStack,
    *,
    prometheus: Prometheus,
    window_s: int | None = None,
    at: float | None = None,
    actor: str | None = None,
    dry_run: bool = False,
    policy: Policy | None = None,
    progress: Callable[[str], None] | None = None,
) -> RolloutResult:
    policy = policy or load_policy()
    window = int(window_s if window_s is not None else policy.window_s.value)
    at = time.time() if at is None else at
    actor = actor or current_actor()
    name, cloud = stack.stack.name, provider.cloud
    with catalog.transaction() as s:
        cand = canary_image(s, name, cloud)
        if cand is None:
            raise UserError(
                f"stack {name} has no canary on {cloud}: nothing to roll out",
                hint=f"Point the canary at a validated image: `imagectl promote IMAGE --stack "
                f"{name} --cloud {cloud} --canary`",
            )
        cand_pk, cand_label, cand_ids = cand.id, cand.cloud_image_id, _ids(s, cand)
        created = _created(s, cand)
        sources = set()
        for ptr in repo.list_pointers(s, stack=name, cloud=cloud):
            src = ptr.image.tags.get(rec.TAG_SOURCE)
            sources.add(src if isinstance(src, int) else ptr.image_id)
        look = 1 + sum(
            1
            for r in s.scalars(
                select(RolloutDecision).where(RolloutDecision.candidate_id == cand_pk)
            )
            if isinstance(r.evidence, dict) and r.evidence.get("tested")
        )
        base_ids: set[str] = set()
        base_pk = None
        for pk in sorted(sources):
            img = repo.get_image(s, pk)
            if img is not None and img.id != cand_pk:
                base_ids |= _ids(s, img)
                created |= _created(s, img)
                base_pk = img.id
    result = RolloutResult(
        name, cloud, HOLD, "", window, at, cand_label, sorted(base_ids),
        queries=queries(name, window, at, policy), prometheus=prometheus.shown, look=look,
        alpha_spent=policy.alpha_at(look),
    )  # fmt: skip
    if not base_ids and sources:
        result.reason = "the canary already is latest: nothing to decide"
    else:
        try:
            evidence = read(prometheus, name, window, at, policy, created=created)
        except PrometheusUnavailable as exc:
            result.reason = f"Prometheus unavailable, the fleet's health is unknown: {exc}"
        else:
            cand_nodes = [n for n in evidence.nodes if n.image_id in cand_ids]
            result.launch_records = evidence.launch_records
            result.queries = evidence.queries
            ids = cand_ids | base_ids
            result.nodes = [n for n in evidence.nodes if n.image_id in ids]
            result.decision, result.reason, result.shapes = decide(
                evidence.nodes, cand_ids, base_ids, policy, look=look,
                launch_records=evidence.launch_records,
            )  # fmt: skip
            result.tested = any(d.tested for d in result.shapes)
            if (
                result.decision == HOLD
                and cand_nodes
                and all(n.status == "blind" for n in cand_nodes)
            ):
                result.reason += (
                    "; no canary node has a watcher looking: enable it with "
                    "`validation.watcher: true` in the stack (the validator role's "
                    "validator_watch_enabled) and rebuild"
                )
    if dry_run:
        result.applied = "dry run: recorded nothing, changed nothing"
        return result
    with catalog.transaction() as s:
        row = RolloutDecision(
            stack=name, cloud=cloud, candidate_id=cand_pk, baseline_id=base_pk,
            decision=result.decision, reason=result.reason, window_s=window, actor=actor,
            evidence=_evidence(result, policy),
        )  # fmt: skip
        s.add(row)
        s.flush()
        result.decision_id = row.id
        repo.log_event(
            s, DECIDED, f"rollout {row.id} of {cand_label}: {result.decision}: {result.reason}",
            image=repo.image_row(s, cand_pk), actor=actor,
            details={"decision_id": row.id, "decision": result.decision},
        )  # fmt: skip
    result.applied = _apply(catalog, provider, stack, result, cand_pk, actor, progress)
    with catalog.transaction() as s:
        stored = s.get(RolloutDecision, result.decision_id)
        assert stored is not None
        stored.applied = result.applied
    return result


def _apply(
    catalog: Catalog,
    provider: Provider,
    stack: ResolvedStack,
    result: RolloutResult,
    cand_pk: int,
    actor: str,
    progress: Callable[[str], None] | None,
) -> str:
    if result.decision == HOLD:
        return "nothing: hold"
    if result.decision == ROLLBACK:
        moved = canary_back(
            catalog, provider, result.stack,
            reason=f"rollout {result.decision_id}: roll back", actor=actor,
        )  # fmt: skip
        block_image(
            catalog, cand_pk, cloud=result.cloud, actor=actor,
            reason=f"rollout {result.decision_id} rolled the canary back: {result.reason}",
        )  # fmt: skip
        where = ", ".join(f"{r}: {b or 'removed'}" for r, (_a, b) in moved.items())
        return f"canary pointer back ({where}); {result.candidate} blocked"
    promoted = promote(
        catalog, provider, stack, cand_pk, actor=actor,
        progress=(lambda region, step, detail: progress(f"{region}: {step} {detail}"))
        if progress else None,
    )  # fmt: skip
    return f"promote: {promoted.state}"


def _evidence(result: RolloutResult, policy: Policy) -> dict[str, object]:
    return {
        "at": result.at,
        "window_s": result.window_s,
        "prometheus": result.prometheus,
        "look": result.look,
        "tested": result.tested,
        "launch_records": result.launch_records,
        "queries": result.queries,
        "candidate": result.candidate,
        "baseline": result.baseline,
        "policy": policy.model_dump(mode="json"),
        "shapes": [s.to_dict() for s in result.shapes],
    }
