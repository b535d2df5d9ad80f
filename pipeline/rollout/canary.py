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

from sqlalchemy import select
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
from imagectl.promotion.gate import GateRefused
from imagectl.promotion.groups import group_rows
from imagectl.promotion.promote import gate_reasons, revoked_reasons
from imagectl.promotion.resolve import ImageRef, resolve_image
from imagectl.stacks.resolve import ResolvedStack

CANARY_SET, CANARY_BACK = "canary.set", "canary.rolled_back"
CANARY_MOVING = "canary.moving"  # recorded before the cloud's pointer moves
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
            _moving(catalog, model.name, provider.cloud, region, before, cloud_id, pk, actor)
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
                    s, CANARY_SET,
                    f"canary of {model.name} on {provider.cloud}/{region} -> {cloud_id}",
                    image=repo.image_row(s, pk), actor=actor,
                    details={"region": region, "image_id": pk, "previous": before},
                )  # fmt: skip
            result.moved[region] = (before, cloud_id)
    return result


def _moving(
    catalog: Catalog,
    stack: str,
    cloud: str,
    region: str,
    now: str | None,
    to: str | None,
    pk: int | None,
    actor: str,
) -> None:
    """The catalog's record of a canary move, written before the cloud's pointer moves."""
    with catalog.transaction() as s:
        repo.log_event(
            s, CANARY_MOVING,
            f"moving the canary of {stack} on {cloud}/{region}: {now or 'none'} -> "
            f"{to or 'removed (latest)'}",
            stack=stack, cloud=cloud, image=repo.image_row(s, pk) if pk else None, actor=actor,
            details={"region": region, "from": now, "to": to},
        )  # fmt: skip


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


def back_locked(
    catalog: Catalog,
    provider: Provider,
    stack: str,
    *,
    reason: str,
    actor: str | None = None,
    naming: set[int] | None = None,
) -> dict[str, tuple[str | None, str | None]]:
    """``canary_back`` for a caller that holds the promotion lock; ``naming``: only the
    regions whose canary names one of these catalog ids."""
    actor = actor or current_actor()
    moved: dict[str, tuple[str | None, str | None]] = {}
    with catalog.transaction() as s:
        plan = []
        for row in canary_pointers(s, stack, provider.cloud):
            if naming is not None and row.image_id not in naming:
                continue
            prev = row.previous_image
            ok = prev is not None and prev.state in CANARY_STATES
            plan.append(
                (row.region, row.image.cloud_image_id, prev.cloud_image_id if ok and prev else None,
                 row.image_id)
            )  # fmt: skip
    for region, now_id, back_to, pk in plan:
        _moving(catalog, stack, provider.cloud, region, now_id, back_to, pk, actor)
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


def _group_ids(session: Session, image: int) -> tuple[str, set[int]]:
    """The stack of ``image`` and the catalog ids of its whole group (source, copies)."""
    img = repo.image_row(session, image)
    source = img.tags.get(rec.TAG_SOURCE) if img.tags else None
    root = repo.image_row(session, source) if isinstance(source, int) else img
    return img.stack, {r.id for r in group_rows(session, root)}


def withdraw_locked(
    catalog: Catalog, provider: Provider, images: set[int], *, reason: str, actor: str | None
) -> dict[str, tuple[str | None, str | None]]:
    """For a caller holding the lock (``rollback``): every canary pointer that names one of
    ``images`` (or a copy of one) moves back, so none names an image taken out of service."""
    with catalog.transaction() as s:
        ids: set[int] = set()
        stacks = set()
        for pk in images:
            stack, group = _group_ids(s, pk)
            ids |= group
            stacks.add(stack)
    moved: dict[str, tuple[str | None, str | None]] = {}
    for stack in sorted(stacks):
        moved.update(back_locked(catalog, provider, stack, reason=reason, actor=actor, naming=ids))
    return moved


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
        stack, ids = _group_ids(s, image)
        named = [p for p in canary_pointers(s, stack, provider.cloud) if p.image_id in ids]
    if not named:
        return {}
    with promotion_lock(catalog, stack, provider.cloud, wait_s=lock_wait_s):
        return back_locked(catalog, provider, stack, reason=reason, actor=actor, naming=ids)
