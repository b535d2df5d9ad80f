"""``rollback()``: every "latest" pointer of a stack back to the previous promoted image.

For each region with a pointer, the target is the newest image that the region's pointer
named before (read from the ``pointer.set`` history in the event log) and that is still
``promoted``. Every region must have one, or nothing changes (``NothingToRollBack``,
exit 2). Then, under the stack's promotion lock: the cloud pointer moves, the catalog
pointer moves (keeping the one it replaced as previous), and the images the pointers
named before (their whole group: source and replicas) become ``rolled_back``. A second
rollback goes one promoted image further back, because rolled-back images are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imagectl.clouds.base import Provider
from imagectl.errors import UserError


class NothingToRollBack(UserError):
    """No earlier promoted image to return to (exit 2)."""


@dataclass
class RollbackResult:
    stack: str
    cloud: str
    moved: dict[str, tuple[str, str]] = field(default_factory=dict)  # region -> (from, to)
    rolled_back: list[str] = field(default_factory=list)  # "<cloud id> in <region>"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "cloud": self.cloud,
            "moved": {r: {"from": a, "to": b} for r, (a, b) in self.moved.items()},
            "rolled_back": self.rolled_back,
        }


def _history(session: Any, stack: str, cloud: str, region: str) -> list[int]:
    """Catalog ids the region's pointer named, newest first (from ``pointer.set`` events)."""
    from imagectl.catalog import repository as repo

    out: list[int] = []
    for ev in repo.events(session, stack=stack, cloud=cloud, kind="pointer.set"):
        if ev.details.get("region") == region:
            pk = ev.details.get("image_id")
            if isinstance(pk, int) and pk not in out:
                out.append(pk)
    return out


def plan_rollback(session: Any, stack: str, cloud: str) -> dict[str, tuple[Any, Any]]:
    """region -> (current Image, target Image); raises NothingToRollBack."""
    from imagectl.catalog import repository as repo

    pointers = repo.list_pointers(session, stack=stack, cloud=cloud)
    if not pointers:
        raise NothingToRollBack(
            f"stack {stack} has no 'latest' pointer on {cloud}: nothing to roll back",
            hint="Promote an image first (`imagectl promote`)",
        )
    plan: dict[str, tuple[Any, Any]] = {}
    missing: list[str] = []
    for ptr in pointers:
        target = None
        for pk in _history(session, stack, cloud, ptr.region):
            img = repo.get_image(session, pk)
            if img is not None and img.id != ptr.image_id and img.state == "promoted":
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


def rollback(
    catalog: Any,
    provider: Provider,
    stack: str,
    *,
    reason: str | None = None,
    lock_wait_s: float = 0.0,
    actor: str | None = None,
) -> RollbackResult:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.lifecycle import current_actor
    from imagectl.catalog.locks import promotion_lock
    from imagectl.promotion.promote import group_rows

    cloud = provider.cloud
    actor = actor or current_actor()
    why = f"rollback{': ' + reason if reason else ''}"
    result = RollbackResult(stack, cloud)
    with promotion_lock(catalog, stack, cloud, wait_s=lock_wait_s):
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
                    if row.state in ("promoted", "partially_promoted"):
                        repo.set_state(s, row, "rolled_back", reason=why, actor=actor)
                        result.rolled_back.append(f"{row.cloud_image_id} in {row.region}")
                        cloud_img = provider.get_image(row.cloud_image_id, row.region)
                        if cloud_img is not None:
                            provider.tag_state(cloud_img, "rolled_back")
            repo.log_event(
                s,
                "rollback.finished",
                f"rolled back {stack} on {cloud}: "
                + ", ".join(f"{r} {a} -> {b}" for r, (a, b) in result.moved.items()),
                stack=stack,
                cloud=cloud,
                actor=actor,
                details={"moved": result.to_dict()["moved"], "rolled_back": result.rolled_back},
            )
    return result
