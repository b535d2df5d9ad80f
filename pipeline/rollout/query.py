"""What ``imagectl status`` shows of a stack's canary: the canary pointer per region and
the latest rollout decisions (JSON-ready dicts)."""

from __future__ import annotations

from sqlalchemy import select

from imagectl.catalog.db import Catalog
from imagectl.catalog.models import RolloutDecision
from imagectl.core.safetext import one_line
from imagectl.redact import scrub
from imagectl.rollout.canary import canary_pointers


def rollout_status(
    catalog: Catalog, stack: str, cloud: str, *, decisions: int = 3
) -> dict[str, object]:
    with catalog.transaction() as s:
        canary = [
            {
                "region": p.region,
                "cloud_image_id": p.image.cloud_image_id,
                "image_state": p.image.state,
                "since": p.updated_at.isoformat(),
                "previous": p.previous_image.cloud_image_id if p.previous_image else None,
            }
            for p in canary_pointers(s, stack, cloud)
        ]
        rows = s.scalars(
            select(RolloutDecision)
            .where(RolloutDecision.stack == stack, RolloutDecision.cloud == cloud)
            .order_by(RolloutDecision.id.desc())
            .limit(decisions)
        )
        latest = [
            {
                "id": r.id,
                "decision": r.decision,
                "reason": one_line(scrub(r.reason)),  # a row from before URLs were redacted
                "at": r.decided_at.isoformat(),
                "window_s": r.window_s,
                "candidate": r.candidate.cloud_image_id if r.candidate else None,
                "applied": one_line(r.applied),
                "actor": r.actor,
            }
            for r in rows
        ]
    return {"canary": canary, "rollouts": latest}
