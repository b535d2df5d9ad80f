"""The canary pointer beside "latest" (``imagectl promote --canary``; issue 47).

A canary is a validated image that the canary fraction of a fleet deploys from before the
rest: ``set_canary`` points the stack's canary pointer at it in every region the image
(its source or a replica) is already in, through the cloud's means
(``Provider.set_canary_pointer``: the local cloud's ``stacks/<stack>/canary`` file) and
the catalog's ``canary_pointers`` row, after the same gate as ``promote`` (receipts,
attestation, not blocked or revoked). Nothing is copied: a canary stays where it was
validated until ``imagectl rollout`` advances it (``promote``, which copies it and moves
"latest") or moves the canary pointer back (``canary_back``: to the image it named
before, or removed when it named none, so canary nodes deploy from "latest" again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import CanaryPointer, Image
from imagectl.catalog.models import utcnow as _utcnow
from imagectl.clouds.base import Provider
from imagectl.promotion import records as rec
from imagectl.promotion.gate import GateRefused
from imagectl.promotion.groups import group_rows
from imagectl.promotion.promote import gate_reasons, revoked_reasons
from imagectl.promotion.resolve import ImageRef, resolve_image
from imagectl.stacks.resolve import ResolvedStack

CANARY_SET, CANARY_BACK = "canary.set", "canary.rolled_back"
CANARY_STATES = (ImageState.VALIDATED, ImageState.PROMOTED)


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


def canary_pointers(session: Session, stack: str, cloud: str | None = None) -> list[CanaryPointer]:
    query = select(CanaryPointer).where(CanaryPointer.stack == stack)
    if cloud is not None:
        query = query.where(CanaryPointer.cloud == cloud)
    return list(session.scalars(query.order_by(CanaryPointer.region)))


def _pointer(session: Session, stack: str, cloud: str, region: str) -> CanaryPointer | None:
    return session.scalars(
        select(CanaryPointer).where(
            CanaryPointer.stack == stack,
            CanaryPointer.cloud == cloud,
            CanaryPointer.region == region,
        )
    ).first()


def set_canary(
    catalog: Catalog,
    provider: Provider,
    stack: ResolvedStack,
    image: ImageRef,
    *,
    actor: str | None = None,
) -> CanaryResult:
    """Point the canary of ``stack`` at ``image`` where the image is (gated)."""
    actor = actor or current_actor()
    model = stack.stack
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
        provider.set_canary_pointer(model.name, region, cloud_id)
        with catalog.transaction() as s:
            row = _pointer(s, model.name, provider.cloud, region)
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
                s, CANARY_SET, f"canary of {model.name} on {provider.cloud}/{region} -> {cloud_id}",
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
    catalog: Catalog, provider: Provider, stack: str, *, reason: str, actor: str | None = None
) -> dict[str, tuple[str | None, str | None]]:
    """Every region's canary pointer back to the image it named before (when that one may
    still be deployed), else removed. Returns region -> (from, to)."""
    actor = actor or current_actor()
    moved: dict[str, tuple[str | None, str | None]] = {}
    with catalog.transaction() as s:
        plan = []
        for row in canary_pointers(s, stack, provider.cloud):
            prev = row.previous_image
            ok = prev is not None and prev.state in CANARY_STATES
            plan.append(
                (row.region, row.image.cloud_image_id, prev.cloud_image_id if ok and prev else None)
            )
    for region, now_id, back_to in plan:
        provider.set_canary_pointer(stack, region, back_to)
        with catalog.transaction() as s:
            current = _pointer(s, stack, provider.cloud, region)
            if current is None:
                continue
            img = current.image
            if back_to is None:
                s.delete(current)
            else:
                assert current.previous_image_id is not None
                current.image_id, current.previous_image_id = current.previous_image_id, None
                current.updated_at, current.updated_by = _utcnow(), actor
            s.flush()
            repo.log_event(
                s, CANARY_BACK,
                f"canary of {stack} on {provider.cloud}/{region}: {now_id} -> "
                f"{back_to or 'removed (latest)'}: {reason}",
                image=img, actor=actor, details={"region": region, "from": now_id, "to": back_to},
            )  # fmt: skip
        moved[region] = (now_id, back_to)
    return moved


def withdraw_canary(
    catalog: Catalog, provider: Provider, image: int, *, reason: str, actor: str | None = None
) -> dict[str, tuple[str | None, str | None]]:
    """Before ``block`` or ``revoke``: when the stack's canary names ``image`` (or a copy
    of it), move the canary pointer back first (``canary_back``), as a promoted image is
    rolled back first. Returns what moved (nothing when the image is no canary)."""
    with catalog.transaction() as s:
        img = repo.image_row(s, image)
        source = img.tags.get(rec.TAG_SOURCE) if img.tags else None
        root = repo.image_row(s, source) if isinstance(source, int) else img
        ids = {r.id for r in group_rows(s, root)}
        stack = img.stack
        named = [p for p in canary_pointers(s, stack, provider.cloud) if p.image_id in ids]
    if not named:
        return {}
    return canary_back(catalog, provider, stack, reason=reason, actor=actor)
