"""How a promotion run ends: every region done -> flip every pointer (cloud, then the
catalog, once) and close as promoted; otherwise close as partially promoted with the
command that resumes it, every pointer unchanged."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Image
from imagectl.core.errors import CloudError, UserError
from imagectl.crashpoints import crash_point
from imagectl.promotion import records as rec
from imagectl.promotion.groups import group_rows, resume_command
from imagectl.promotion.regions import RegionRun
from imagectl.promotion.results import PromotionResult


def set_group_state(s: Session, source: Image, target: ImageState, reason: str, actor: str) -> None:
    for row in group_rows(s, source):
        if row.id != source.id and row.state == ImageState.PROMOTING:
            repo.set_state(s, row, target, reason=reason, actor=actor)


def close_partial(
    catalog: Catalog, run: RegionRun, result: PromotionResult, targets: list[str], failed: list[str]
) -> None:
    done = [r for r in targets if r not in failed]
    errors = "; ".join(f"{r}: {result.regions[r].error}" for r in failed)
    with catalog.transaction() as s:
        promo = repo.finish_promotion(
            s,
            run.promotion_id,
            completed_regions=done,
            actor=run.actor,
            message=f"pointer unchanged; failed {errors}",
        )
        img = repo.image_row(s, run.source_pk)
        target = ImageState.PARTIALLY_PROMOTED if done else ImageState.VALIDATED
        if done:
            set_group_state(s, img, target, f"promotion {promo.id} partial", run.actor or "")
        result.state = img.state if img.state == ImageState.PARTIALLY_PROMOTED else "failed"
        # after a resume limited by --regions, the command names what is left to do
        limited = any(result.regions[r].state == "not_attempted" for r in failed)
        left = failed if limited else targets
        result.resume_command = resume_command(img, result.cloud, left, targets)
        repo.log_event(
            s,
            "promotion.finished",
            f"promotion {promo.id} of {img.label}: {result.state}; pointer unchanged; "
            f"resume with: {result.resume_command}",
            image=img,
            actor=run.actor,
            details={
                "promotion": promo.id,
                "state": result.state,
                "done": done,
                "failed": failed,
                "resume": result.resume_command,
            },
        )


def flip_and_close(
    catalog: Catalog, run: RegionRun, result: PromotionResult, targets: list[str]
) -> None:
    stack, cloud = run.stack.name, result.cloud
    crash_point("before_pointer_flip")
    with catalog.transaction() as s:
        img = repo.get_image(s, run.source_pk)
        flips = repo.events(s, image=run.source_pk, kind=rec.FLIP_STARTED)
        previous = {}
        for region in targets:
            ptr = repo.get_pointer(s, stack, cloud, region)
            previous[region] = ptr.image.cloud_image_id if ptr else None
        if flips:
            previous = dict(flips[-1].details.get("previous", previous))
        else:
            repo.log_event(
                s,
                rec.FLIP_STARTED,
                f"flipping latest of {stack} in "
                f"{', '.join(targets)} to {img.cloud_image_id if img else '?'}",
                image=img,
                actor=run.actor,
                details={"promotion": run.promotion_id, "previous": previous},
            )
    result.previous_pointers = previous
    replicas = {r: result.regions[r].replica_id or "" for r in targets}
    with catalog.transaction() as s:
        moves: dict[str, tuple[int | None, int]] = {}
        for region in targets:
            row = repo.find_image(s, cloud, region, replicas[region])
            if row is None:
                raise CloudError(f"replica {replicas[region]} in {region} is not in the catalog")
            ptr = repo.get_pointer(s, stack, cloud, region)
            moves[region] = (ptr.image_id if ptr else None, row.id)
        todo = []
        for record in repo.start_flips(s, run.promotion_id, stack, cloud, moves):
            ptr = repo.get_pointer(s, stack, cloud, record.region)
            if ptr is not None and ptr.image_id == record.to_image_id:
                if record.state != "done":  # flipped by an earlier run
                    repo.mark_flip(s, run.promotion_id, record.region, "done")
            else:
                todo.append(record.region)

    def flip(region: str) -> None:
        """The cloud pointer, then at once this region's catalog pointer and flip record:
        a flip that stops half way leaves every region's record true."""
        run.tell(region, "pointer", f"latest -> {replicas[region]}")
        run.provider.set_pointer(stack, region, replicas[region])
        crash_point("after_pointer_set")
        with run.transaction() as s:
            row = repo.find_image(s, cloud, region, replicas[region])
            if row is None:  # each region's copy is recorded before any flip starts
                raise UserError(
                    f"replica {replicas[region]} in {cloud}/{region} is not in the catalog",
                    hint="Resume the promotion: `imagectl promote IMAGE`",
                )
            repo.set_pointer(
                s,
                stack,
                cloud,
                region,
                row,
                actor=run.actor,
                reason=f"promotion {run.promotion_id}",
            )
            repo.mark_flip(s, run.promotion_id, region, "done")

    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        list(pool.map(flip, todo))  # a failure propagates: the promotion stays open
    with catalog.transaction() as s:
        img = repo.get_image(s, run.source_pk)
        if not repo.events(s, image=run.source_pk, kind=rec.FLIPPED):
            repo.log_event(
                s,
                rec.FLIPPED,
                f"latest of {stack} on {cloud} is {result.image_id} in {', '.join(targets)}",
                image=img,
                actor=run.actor,
                details={"promotion": run.promotion_id, "regions": targets, "previous": previous},
            )
    result.pointer_flipped = True

    def tag(region: str) -> None:
        replica = run.provider.get_image(replicas[region], region)
        if replica is not None:
            run.provider.tag_state(replica, ImageState.PROMOTED)

    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        list(pool.map(tag, targets))
    crash_point("before_finish")
    with catalog.transaction() as s:
        promo = repo.finish_promotion(
            s,
            run.promotion_id,
            completed_regions=targets,
            actor=run.actor,
            message="every region replicated; pointers flipped",
        )
        img = repo.image_row(s, run.source_pk)
        set_group_state(
            s, img, ImageState.PROMOTED, f"promotion {promo.id} succeeded", run.actor or ""
        )
        result.state = img.state
        repo.log_event(
            s,
            "promotion.finished",
            f"promotion {promo.id} of {result.image_id}: promoted to {', '.join(targets)}",
            image=img,
            actor=run.actor,
            details={"promotion": promo.id, "state": result.state, "done": targets},
        )
