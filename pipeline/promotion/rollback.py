"""``rollback()``: every "latest" pointer of a stack back to the previous promoted image.

For each region with a pointer, the target is the newest image that the region's pointer
named before (read from the ``pointer.set`` history in the event log) and that is still
``promoted``. Every region must have one, or nothing changes (``NothingToRollBack``,
exit 2). Then, under the stack's promotion lock: the cloud pointer moves, the catalog
pointer moves (keeping the one it replaced as previous), and the images the pointers
named before (their whole group: source and replicas) become ``rolled_back``, and every
canary pointer that names one of them moves back too (still under the lock: a rolled-back
image is named by neither pointer). A second rollback goes one promoted image further
back, because rolled-back images are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.locks import promotion_lock
from imagectl.catalog.models import Image, PointerFlip, Promotion
from imagectl.clouds.base import Provider
from imagectl.core.errors import UserError
from imagectl.promotion.canary_pointers import withdraw_locked
from imagectl.promotion.finish import set_group_state
from imagectl.promotion.groups import group_rows


class NothingToRollBack(UserError):
    """No earlier promoted image to return to (exit 2)."""


@dataclass
class RollbackResult:
    stack: str
    cloud: str
    moved: dict[str, tuple[str, str]] = field(default_factory=dict)  # region -> (from, to)
    rolled_back: list[str] = field(default_factory=list)  # "<cloud id> in <region>"
    # region -> (from, to): canary pointers that named a rolled-back image (to: None, removed)
    canary: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def moves(self) -> dict[str, dict[str, str]]:
        """region -> {from, to}: the pointers moved."""
        return {r: {"from": a, "to": b} for r, (a, b) in self.moved.items()}

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "stack": self.stack,
            "cloud": self.cloud,
            "moved": self.moves(),
            "rolled_back": self.rolled_back,
        }
        if self.canary:
            out["canary"] = {r: {"from": a, "to": b} for r, (a, b) in self.canary.items()}
        return out


def _history(session: Session, stack: str, cloud: str, region: str) -> list[int]:
    """Catalog ids the region's pointer named, newest first (from ``pointer.set`` events)."""
    out: list[int] = []
    for ev in repo.events(session, stack=stack, cloud=cloud, kind="pointer.set"):
        if ev.details.get("region") == region:
            pk = ev.details.get("image_id")
            if isinstance(pk, int) and pk not in out:
                out.append(pk)
    return out


def plan_rollback(session: Session, stack: str, cloud: str) -> dict[str, tuple[Image, Image]]:
    """region -> (current Image, target Image); raises NothingToRollBack."""
    pointers = repo.list_pointers(session, stack=stack, cloud=cloud)
    if not pointers:
        raise NothingToRollBack(
            f"stack {stack} has no 'latest' pointer on {cloud}: nothing to roll back",
            hint="Promote an image first (`imagectl promote`)",
        )
    plan: dict[str, tuple[Image, Image]] = {}
    missing: list[str] = []
    for ptr in pointers:
        target = None
        for pk in _history(session, stack, cloud, ptr.region):
            img = repo.get_image(session, pk)
            if img is not None and img.id != ptr.image_id and img.state == ImageState.PROMOTED:
                target = img
                break
        if target is None:
            missing.append(f"{ptr.region} (latest is {ptr.image.cloud_image_id})")
        else:
            plan[ptr.region] = (ptr.image, target)
    if missing:
        raise NothingToRollBack(
            f"stack {stack} on {cloud} has no earlier promoted image to roll back to in "
            f"{', '.join(missing)}",
            hint="Promote a fixed image instead, or see `imagectl status` for the history",
        )
    return plan


def open_flip(
    session: Session, stack: str, cloud: str
) -> tuple[Promotion, list[PointerFlip]] | None:
    """The promotion whose pointer flip started and did not finish (a region still
    ``pending``), with its flips; None when every flip finished."""
    by_promotion: dict[int, list[PointerFlip]] = {}
    for flip in repo.flips(session, stack=stack, cloud=cloud):
        by_promotion.setdefault(flip.promotion_id, []).append(flip)
    for pid, group in sorted(by_promotion.items(), reverse=True):
        promo = session.get(Promotion, pid)
        if (
            promo is not None
            and promo.state == "running"
            and any(f.state == "pending" for f in group)
        ):
            return promo, group
    return None


def _undo_open_flip(
    catalog: Catalog,
    provider: Provider,
    stack: str,
    cloud: str,
    why: str,
    actor: str,
    result: RollbackResult,
) -> bool:
    """A flip that stopped half way is undone, not rolled back past: every region of that
    promotion goes back to the image it named before the flip (regions that never moved
    stay), and the promotion closes without promoting. Rolling back from the catalog's
    pointers alone would send the moved regions one image too far."""
    with catalog.transaction() as s:
        found = open_flip(s, stack, cloud)
        if found is None:
            return False
        promo, group = found
        back = {
            f.region: (f.from_image_id, f.from_image.cloud_image_id if f.from_image else None)
            for f in group
        }
        now = {f.region: f.to_image.cloud_image_id for f in group}
        promo_id = promo.id
        repo.log_event(
            s,
            "rollback.started",
            f"undoing the unfinished flip of promotion {promo_id} of {stack} on {cloud}",
            stack=stack,
            cloud=cloud,
            actor=actor,
            details={"promotion": promo_id, "back": {r: b[1] for r, b in back.items()}},
        )
    for region, (pk, cloud_id) in sorted(back.items()):
        if pk is None or cloud_id is None:
            continue  # no earlier image: nothing to point back at (the flip's first image)
        provider.set_pointer(stack, region, cloud_id)
        with catalog.transaction() as s:
            ptr = repo.get_pointer(s, stack, cloud, region)
            if ptr is None or ptr.image_id != pk:
                repo.set_pointer(s, stack, cloud, region, pk, actor=actor, reason=why)
                result.moved[region] = (now[region], cloud_id)
    with catalog.transaction() as s:
        for flip in repo.flips(s, promotion_id=promo_id):
            repo.mark_flip(s, promo_id, flip.region, "undone")

        promo = repo.finish_promotion(
            s, promo_id, completed_regions=[], actor=actor, message=f"flip undone: {why}"
        )
        img = promo.image
        set_group_state(s, img, ImageState.VALIDATED, f"flip of promotion {promo_id} undone", actor)
        result.rolled_back.append(f"{img.cloud_image_id} (flip of promotion {promo_id} undone)")
        repo.log_event(
            s,
            "rollback.finished",
            f"undid the unfinished flip of promotion {promo_id} of {stack} on {cloud}",
            stack=stack,
            cloud=cloud,
            actor=actor,
            details={"moved": result.moves(), "promotion": promo_id},
        )
    return True


def rollback(
    catalog: Catalog,
    provider: Provider,
    stack: str,
    *,
    reason: str | None = None,
    lock_wait_s: float = 0.0,
    actor: str | None = None,
) -> RollbackResult:
    cloud = provider.cloud
    actor = actor or current_actor()
    why = f"rollback{': ' + reason if reason else ''}"
    result = RollbackResult(stack, cloud)
    with promotion_lock(catalog, stack, cloud, wait_s=lock_wait_s):
        if _undo_open_flip(catalog, provider, stack, cloud, why, actor, result):
            return result
        with catalog.transaction() as s:
            plan = {
                r: (cur.id, tgt.id, cur.cloud_image_id, tgt.cloud_image_id)
                for r, (cur, tgt) in plan_rollback(s, stack, cloud).items()
            }
            repo.log_event(
                s,
                "rollback.started",
                f"rolling back {stack} on {cloud} in {', '.join(plan)}",
                stack=stack,
                cloud=cloud,
                actor=actor,
                details={"plan": {r: {"from": p[2], "to": p[3]} for r, p in plan.items()}},
            )
        for region, (_cur_pk, tgt_pk, cur_id, tgt_id) in sorted(plan.items()):
            provider.set_pointer(stack, region, tgt_id)
            with catalog.transaction() as s:
                repo.set_pointer(s, stack, cloud, region, tgt_pk, actor=actor, reason=why)
            result.moved[region] = (cur_id, tgt_id)
        retired: set[int] = set()
        with catalog.transaction() as s:
            sources = set()
            for _cur_pk, _t, _c, _i in plan.values():
                row = repo.get_image(s, _cur_pk)
                if row is None:
                    continue
                src_pk = row.tags.get("imagectl:source-image", row.id)
                sources.add(src_pk)
            for src_pk in sorted(sources):
                src = repo.get_image(s, src_pk)
                if src is None:
                    continue
                for row in group_rows(s, src):
                    if row.state in (ImageState.PROMOTED, ImageState.PARTIALLY_PROMOTED):
                        retired.add(row.id)
                        repo.set_state(s, row, ImageState.ROLLED_BACK, reason=why, actor=actor)
                        result.rolled_back.append(f"{row.cloud_image_id} in {row.region}")
                        cloud_img = provider.get_image(row.cloud_image_id, row.region)
                        if cloud_img is not None:
                            provider.tag_state(cloud_img, ImageState.ROLLED_BACK)
            repo.log_event(
                s,
                "rollback.finished",
                f"rolled back {stack} on {cloud}: "
                + ", ".join(f"{r} {a} -> {b}" for r, (a, b) in result.moved.items()),
                stack=stack,
                cloud=cloud,
                actor=actor,
                details={"moved": result.moves(), "rolled_back": result.rolled_back},
            )
        if retired:
            result.canary = withdraw_locked(catalog, provider, retired, reason=why, actor=actor)
    return result
