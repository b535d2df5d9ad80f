"""What a promotion has done so far, read back from the catalog's event log.

Every side effect of a promotion is bracketed by an event on the *source* image (the one
that was validated). Re-running a promotion folds those events into a ``RegionProgress``
per region and continues from there: a recorded copy token is reused (the cloud returns
the same copy), a recorded copy id is waited on instead of copied again, a finished
region is skipped. Event kinds (``details`` always carry ``promotion`` and ``region``):

- ``promotion.region.copy_requested`` (token; every region's in one transaction before
  any copy is asked for) -> ``copy_started`` (replica id, after the cloud accepted the
  copy) -> ``done`` (written with the replica's catalog row once the copy is available,
  tagged and shared; both are idempotent, so a run killed before ``done`` redoes them)
- ``promotion.region.failed`` (error, step; ``new_token`` when the copy itself failed and
  a retry must ask for a new one)
- ``promotion.pointer.flip_started`` (previous pointers), then the cloud pointers of all
  regions are set in parallel, then one transaction records every ``pointer.set`` (written
  by the catalog) and ``promotion.pointer.flipped`` (once per image). A run killed between
  the cloud calls and that transaction sets the same values again and records them once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from imagectl.catalog.models import Event

REGION = "promotion.region."
COPY_REQUESTED = REGION + "copy_requested"
COPY_STARTED = REGION + "copy_started"
AVAILABLE = REGION + "available"
TAGGED = REGION + "tagged"
SHARED = REGION + "shared"
DONE = REGION + "done"
FAILED = REGION + "failed"
FLIP_STARTED = "promotion.pointer.flip_started"
FLIPPED = "promotion.pointer.flipped"
TAG_SOURCE = "imagectl:source-image"  # catalog id of the validated image a replica copies


@dataclass
class RegionProgress:
    region: str
    token: str | None = None
    replica_id: str | None = None
    available: bool = False
    tagged: bool = False
    shared: bool = False
    done: bool = False
    failed: str | None = None
    attempts: int = 0  # copies that failed for good (each retry gets a new token)


def copy_token(
    image_pk: int, cloud_image_id: str, region: str, promotion_id: int, attempt: int
) -> str:
    """The idempotency token of one copy: the same inputs give the same token (<= 64 chars)."""
    raw = f"{image_pk}|{cloud_image_id}|{region}|{promotion_id}|{attempt}"
    return "imagectl-" + hashlib.sha256(raw.encode()).hexdigest()[:40]


def fold(events: list[Event], regions: list[str]) -> dict[str, RegionProgress]:
    """Region progress from the image's events (any order; folded oldest first)."""
    progress = {r: RegionProgress(r) for r in regions}
    for ev in sorted(events, key=lambda e: (e.at, e.id)):
        if not ev.kind.startswith(REGION):
            continue
        p = progress.get(str(ev.details.get("region")))
        if p is None:
            continue
        d = ev.details
        if ev.kind == COPY_REQUESTED:
            p.token, p.failed = d["token"], None
        elif ev.kind == COPY_STARTED:
            p.token, p.replica_id = d.get("token", p.token), d["replica_id"]
        elif ev.kind == AVAILABLE:
            p.replica_id, p.available = d["replica_id"], True
        elif ev.kind == TAGGED:
            p.tagged = True
        elif ev.kind == SHARED:
            p.shared = True
        elif ev.kind == DONE:
            p.done, p.failed = True, None
            p.replica_id = d.get("replica_id", p.replica_id)
            p.available = p.tagged = p.shared = True
        elif ev.kind == FAILED:
            p.failed = d.get("error", "failed")
            if d.get("new_token"):
                p.attempts += 1
                p.token = p.replica_id = None
                p.available = p.tagged = p.shared = p.done = False
    return progress
