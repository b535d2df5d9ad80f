"""Read-only views for other parts (drift, status, the local end-to-end run)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, object_session

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import CANDIDATE_STATES, ImageState
from imagectl.catalog.models import Image, Promotion, ValidationRun
from imagectl.core.errors import UserError
from imagectl.promotion import records as rec
from imagectl.promotion.groups import resume_command
from imagectl.promotion.rollback import open_flip
from imagectl.tags import TAG_REVOKED


def current_pointers(catalog: Catalog, stack: str, cloud: str) -> dict[str, str]:
    """region -> the cloud image id the catalog says "latest" names (what drift expects)."""
    with catalog.transaction() as s:
        return {
            p.region: p.image.cloud_image_id
            for p in repo.list_pointers(s, stack=stack, cloud=cloud)
        }


@dataclass(frozen=True)
class PromotionEvent:
    """One promotion, rollback, retention, pointer or image event of the event log."""

    at: str  # ISO 8601
    actor: str
    kind: str
    message: str
    image_id: int | None
    details: dict[str, object] | None


def promotion_events(
    catalog: Catalog, stack: str, cloud: str | None = None
) -> list[PromotionEvent]:
    """Every promotion, rollback, retention and pointer event of a stack, oldest first."""
    prefixes = ("promotion.", "pointer.", "rollback.", "retention.", "image.")
    with catalog.transaction() as s:
        rows = [e for e in repo.events(s, stack=stack, cloud=cloud) if e.kind.startswith(prefixes)]
        return [
            PromotionEvent(
                at=e.at.isoformat(),
                actor=e.actor,
                kind=e.kind,
                message=e.message,
                image_id=e.image_id,
                details=e.details,
            )
            for e in reversed(rows)
        ]


@dataclass(frozen=True)
class UnfinishedFlip:
    """A pointer flip that started and did not finish: which regions moved, which did
    not, how to finish or undo it."""

    promotion: int
    image: str
    done: list[str]
    pending: list[str]
    finish: str  # the command that finishes it
    undo: str  # the command that undoes it


def unfinished_flip(session: Session, stack: str, cloud: str) -> UnfinishedFlip | None:
    """The pointer flip of ``stack`` on ``cloud`` that started and did not finish."""
    found = open_flip(session, stack, cloud)
    if found is None:
        return None
    promo, flips = found
    regions = list(promo.target_regions)
    return UnfinishedFlip(
        promotion=promo.id,
        image=promo.image.cloud_image_id,
        done=[f.region for f in flips if f.state == "done"],
        pending=[f.region for f in flips if f.state == "pending"],
        finish=resume_command(promo.image, cloud, regions, regions),
        undo=f"imagectl rollback --stack {stack} --cloud {cloud}",
    )


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _mode(run: ValidationRun) -> str:
    try:
        body = run.body
    except UserError:  # a corrupt stored receipt: the gate refuses it, status shows it
        return "unknown"
    return "sandbox replay" if body.mode == "replay" and body.sandbox else body.mode


def _newest_by_shape(img: Image) -> dict[str, ValidationRun]:
    """The newest receipt of every validation shape of ``img`` (what the gate judges)."""
    newest: dict[str, ValidationRun] = {}
    for run in sorted(img.validation_runs, key=lambda r: (r.received_at, r.id)):
        newest[run.shape] = run
    return newest


@dataclass(frozen=True)
class ShapeVerdict:
    """The newest receipt of one validation shape: its verdict (``passed``: pass), host,
    profile, how it was made and when it came."""

    shape: str
    verdict: str
    passed: bool
    worst_action: str
    host: str
    profile: str
    mode: str
    received_at: str | None


def shapes_of(img: Image) -> list[ShapeVerdict]:
    """Per validation shape, the newest receipt's verdict: which shapes the image passed,
    failed, and on which host, with which profile, when."""
    return [
        ShapeVerdict(
            shape=shape,
            verdict=run.verdict,
            passed=run.verdict == "pass",
            worst_action=run.worst_action,
            host=run.host,
            profile=run.profile,
            mode=_mode(run),
            received_at=_time(run.received_at),
        )
        for shape, run in sorted(_newest_by_shape(img).items())
    ]


def validated_by(img: Image) -> str | None:
    """How the image's newest receipts were made: live, replay, or sandbox replay (a try-it
    replay the gate accepted through the explicit --sandbox switch)."""
    newest = _newest_by_shape(img)
    modes = {_mode(r) for r in newest.values()}
    if not modes:
        return None
    for mode in ("sandbox replay", "replay", "unknown"):
        if mode in modes:
            return mode
    return "live"


def source_of(img: Image) -> Image | None:
    """The validated image a replica (a promotion's copy in another region) copies; None
    for an image that is no copy, or whose source row is gone."""
    ref = img.tags.get(rec.TAG_SOURCE)
    session = object_session(img)
    if ref is None or session is None:
        return None
    try:
        return session.get(Image, int(ref))
    except (TypeError, ValueError):
        return None


def _image(img: Image) -> dict[str, Any]:
    # a copy was never validated itself: it carries its source's receipts, named as such
    source = source_of(img)
    judged = source or img
    return {
        "id": img.id,
        "cloud_image_id": img.cloud_image_id,
        "region": img.region,
        "state": img.state,
        "stack_digest": img.stack_digest,
        "build_id": img.build.build_id if img.build else None,
        "created_at": _time(img.created_at),
        "state_changed_at": _time(img.state_changed_at),
        "tags": img.tags,
        "copy_of": None
        if source is None
        else {"id": source.id, "cloud_image_id": source.cloud_image_id, "region": source.region},
        "validated_by": validated_by(judged),
        "shapes": [asdict(v) for v in shapes_of(judged)],
        "revoked": img.tags.get(TAG_REVOKED),  # the signed revocation's digest (revoke)
    }


def _in_promotion(s: Session, stack: str, cloud: str) -> list[dict[str, Any]]:
    """Every image whose promotion stopped part way (``partially_promoted``) or is running
    or was killed (``promoting``), with the regions its promotion reached (copy done) and
    the ones it did not, and the command that finishes it. Only validated source images:
    their replicas are the reached regions."""
    states = (ImageState.PARTIALLY_PROMOTED, ImageState.PROMOTING)
    out = []
    for img in repo.list_images(s, stack=stack, cloud=cloud, state=states):
        if img.tags.get(rec.TAG_SOURCE) is not None:
            continue  # a replica: shown as its source's reached region
        promo = s.scalars(
            select(Promotion).where(Promotion.image_id == img.id).order_by(Promotion.id.desc())
        ).first()
        targets = list(promo.target_regions) if promo else []
        folded = rec.fold(repo.events(s, image=img.id, kind=rec.REGION), targets)
        reached = [r for r in targets if folded[r].done]
        missing = [r for r in targets if not folded[r].done]
        out.append(
            {
                **_image(img),
                "promotion": promo.id if promo else None,
                "regions_reached": reached,
                "regions_missing": missing,
                "errors": {r: folded[r].failed for r in missing if folded[r].failed},
                "resume": resume_command(img, cloud, targets, targets),
            }
        )
    return out


def catalog_status(
    catalog: Catalog, *, stack: str | None, cloud: str | None, events: int
) -> list[dict[str, Any]]:
    """``imagectl status``: per (stack, cloud) pair in the catalog, the current image of
    every region (with the previous one), candidates, blocked images with their reasons,
    images part way through a promotion (``partial``: regions reached and missing), the
    ``events`` newest events and an unfinished pointer flip, as plain data."""
    out: list[dict[str, Any]] = []
    with catalog.transaction() as s:
        for st, cl in repo.stacks_and_clouds(s):
            if (stack and st != stack) or (cloud and cl != cloud):
                continue
            current = []
            for p in repo.list_pointers(s, stack=st, cloud=cl):
                prev = p.previous_image
                current.append(
                    {
                        "region": p.region,
                        "image": _image(p.image),
                        "previous": _image(prev) if prev else None,
                        "updated_at": _time(p.updated_at),
                        "updated_by": p.updated_by,
                    }
                )
            candidates = [
                _image(i) for i in repo.list_images(s, stack=st, cloud=cl, state=CANDIDATE_STATES)
            ]
            blocked = [
                {**_image(i), "reason": i.blocked_reason}
                for i in repo.list_images(s, stack=st, cloud=cl, state=ImageState.BLOCKED)
            ]
            recent = [
                {
                    "at": _time(e.at),
                    "actor": e.actor,
                    "kind": e.kind,
                    "image_id": e.image_id,
                    "message": e.message,
                }
                for e in repo.events(s, stack=st, cloud=cl, limit=events)
            ]
            out.append(
                {
                    "stack": st,
                    "cloud": cl,
                    "unfinished_flip": asdict(flip)
                    if (flip := unfinished_flip(s, st, cl))
                    else None,
                    "current": current,
                    "candidates": candidates,
                    "blocked": blocked,
                    "partial": _in_promotion(s, st, cl),
                    "events": recent,
                }
            )
    return out
