"""The canary pointer's moves back, for the promotion package's own callers.

``rollback`` of latest, ``revoke`` and ``block`` take images out of service while holding
the stack's promotion lock; these move back every canary pointer that names one of them
(``withdraw_locked``), each region's move recorded in the catalog (``canary.moving``)
before the cloud's pointer moves. ``imagectl.rollout.canary`` (the canary's other moves,
``promote --canary``, ``rollout``) takes the lock and calls these too.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import CanaryPointer
from imagectl.catalog.models import utcnow as _utcnow
from imagectl.clouds.base import Provider
from imagectl.promotion.groups import group_rows
from imagectl.promotion.records import TAG_SOURCE

CANARY_BACK = "canary.rolled_back"
CANARY_MOVING = "canary.moving"  # recorded before the cloud's pointer moves
CANARY_STATES = (ImageState.VALIDATED, ImageState.PROMOTED)


def canary_pointers(session: Session, stack: str, cloud: str | None = None) -> list[CanaryPointer]:
    query = select(CanaryPointer).where(CanaryPointer.stack == stack)
    if cloud is not None:
        query = query.where(CanaryPointer.cloud == cloud)
    return list(session.scalars(query.order_by(CanaryPointer.region)))


def pointer_row(session: Session, stack: str, cloud: str, region: str) -> CanaryPointer | None:
    return session.scalars(
        select(CanaryPointer).where(
            CanaryPointer.stack == stack,
            CanaryPointer.cloud == cloud,
            CanaryPointer.region == region,
        )
    ).first()


def record_moving(
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
        record_moving(catalog, stack, provider.cloud, region, now_id, back_to, pk, actor)
        provider.set_canary_pointer(stack, region, back_to)
        with catalog.transaction() as s:
            current = pointer_row(s, stack, provider.cloud, region)
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


def group_ids(session: Session, image: int) -> tuple[str, set[int]]:
    """The stack of ``image`` and the catalog ids of its whole group (source, copies)."""
    img = repo.image_row(session, image)
    source = img.tags.get(TAG_SOURCE) if img.tags else None
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
            stack, group = group_ids(s, pk)
            ids |= group
            stacks.add(stack)
    moved: dict[str, tuple[str | None, str | None]] = {}
    for stack in sorted(stacks):
        moved.update(back_locked(catalog, provider, stack, reason=reason, actor=actor, naming=ids))
    return moved
