"""The canary pointer beside "latest" (``imagectl promote --canary``).

A canary is a validated image that the canary fraction of a fleet deploys from before the
rest: ``set_canary`` points the stack's canary pointer at it in every region the image
(its source or a replica) is already in, through the cloud's means
(``Provider.set_canary_pointer``: the local cloud's ``stacks/<stack>/canary`` file) and
the catalog's ``canary_pointers`` row, after the same gate as ``promote`` (receipts,
attestation, not blocked or revoked). Nothing is copied: a canary stays where it was
validated until ``imagectl rollout`` advances it (``promote``, which copies it and moves
"latest") or moves the canary pointer back (``canary_back``: to the image it named
before, or removed when it named none, so canary nodes deploy from "latest" again).

Both pointers move under one lock: every canary move takes the stack's promotion lock
(``catalog.locks.promotion_lock``, as ``promote`` and ``rollback`` do), and each region's
move is recorded in the catalog (a ``canary.moving`` event naming from and to) before the
cloud's pointer moves. ``rollback`` of latest, ``revoke`` and ``block`` move back every
canary pointer that names an image they take out of service (``withdraw_locked``), so a
rolled-back image is named by neither pointer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.locks import promotion_lock
from imagectl.catalog.models import CanaryPointer, Image
from imagectl.catalog.models import utcnow as _utcnow
from imagectl.clouds.base import Provider
from imagectl.promotion import records as rec
from imagectl.promotion.canary_pointers import (
    CANARY_BACK,
    CANARY_MOVING,
    CANARY_STATES,
    back_locked,
    canary_pointers,
    group_ids,
    pointer_row,
    record_moving,
)
from imagectl.promotion.gate import GateRefused
from imagectl.promotion.groups import group_rows
from imagectl.promotion.promote import gate_reasons, revoked_reasons
from imagectl.promotion.resolve import ImageRef, resolve_image
from imagectl.stacks.resolve import ResolvedStack

CANARY_SET = "canary.set"
__all__ = ["CANARY_BACK", "CANARY_MOVING", "CANARY_SET", "CANARY_STATES", "canary_back",
           "canary_image", "canary_pointers", "set_canary", "withdraw_canary"]  # fmt: skip


@dataclass
class CanaryResult:
    stack: str
    cloud: str
    image_id: str
    moved: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "stack": self.stack,
            "cloud": self.cloud,
            "image_id": self.image_id,
            "moved": {r: {"from": a, "to": b} for r, (a, b) in self.moved.items()},
        }


def set_canary(
    catalog: Catalog,
    provider: Provider,
    stack: ResolvedStack,
    image: ImageRef,
    *,
    actor: str | None = None,
    lock_wait_s: float = 0.0,
) -> CanaryResult:
    """Point the canary of ``stack`` at ``image`` where the image is (gated), under the
    stack's promotion lock."""
    actor = actor or current_actor()
    model = stack.stack
    with promotion_lock(catalog, model.name, provider.cloud, wait_s=lock_wait_s):
        with catalog.transaction() as s:
            img = resolve_image(s, image, stack=model.name, cloud=provider.cloud)
            reasons = revoked_reasons(s, img)
            if img.state not in CANARY_STATES:
                reasons.append(f"the image is '{img.state}', not validated")
            elif img.state == ImageState.VALIDATED:
                reasons += gate_reasons(s, img, model, stack.digest)
            if reasons:
                raise GateRefused(img.label, reasons)
            rows = [(r.region, r.cloud_image_id, r.id) for r in group_rows(s, img)]
            label = img.cloud_image_id
        result = CanaryResult(model.name, provider.cloud, label)
        for region, cloud_id, pk in rows:
            before = provider.get_canary_pointer(model.name, region)
            record_moving(catalog, model.name, provider.cloud, region, before, cloud_id, pk, actor)
            provider.set_canary_pointer(model.name, region, cloud_id)
            with catalog.transaction() as s:
                row = pointer_row(s, model.name, provider.cloud, region)
                if row is None:
                    row = CanaryPointer(
                        stack=model.name, cloud=provider.cloud, region=region, image_id=pk,
                        updated_by=actor,
                    )  # fmt: skip
                    s.add(row)
                elif row.image_id != pk:
                    row.previous_image_id, row.image_id = row.image_id, pk
                row.updated_at, row.updated_by = _utcnow(), actor
                s.flush()
                repo.log_event(
                    s, CANARY_SET,
                    f"canary of {model.name} on {provider.cloud}/{region} -> {cloud_id}",
                    image=repo.image_row(s, pk), actor=actor,
                    details={"region": region, "image_id": pk, "previous": before},
                )  # fmt: skip
            result.moved[region] = (before, cloud_id)
    return result


def canary_image(session: Session, stack: str, cloud: str) -> Image | None:
    """The source image the stack's canary names (None: no canary)."""
    for row in canary_pointers(session, stack, cloud):
        img = row.image
        source = img.tags.get(rec.TAG_SOURCE) if img.tags else None
        if isinstance(source, int):
            return repo.get_image(session, source)
        return img
    return None


def canary_back(
    catalog: Catalog,
    provider: Provider,
    stack: str,
    *,
    reason: str,
    actor: str | None = None,
    lock_wait_s: float = 0.0,
) -> dict[str, tuple[str | None, str | None]]:
    """Every region's canary pointer back to the image it named before (when that one may
    still be deployed), else removed, under the stack's promotion lock. Returns region ->
    (from, to)."""
    with promotion_lock(catalog, stack, provider.cloud, wait_s=lock_wait_s):
        return back_locked(catalog, provider, stack, reason=reason, actor=actor)


def withdraw_canary(
    catalog: Catalog,
    provider: Provider,
    image: int,
    *,
    reason: str,
    actor: str | None = None,
    lock_wait_s: float = 0.0,
) -> dict[str, tuple[str | None, str | None]]:
    """Before ``block`` or ``revoke``: when the stack's canary names ``image`` (or a copy
    of it), move those regions' canary pointer back first, under the promotion lock, as a
    promoted image is rolled back first. Returns what moved (nothing when the image is no
    canary)."""
    with catalog.transaction() as s:
        stack, ids = group_ids(s, image)
        named = [p for p in canary_pointers(s, stack, provider.cloud) if p.image_id in ids]
    if not named:
        return {}
    with promotion_lock(catalog, stack, provider.cloud, wait_s=lock_wait_s):
        return back_locked(catalog, provider, stack, reason=reason, actor=actor, naming=ids)
