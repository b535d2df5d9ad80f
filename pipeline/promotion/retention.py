"""Retention and deprecation: keep the last K promoted images of a stack, deprecate older.

An image "group" is a validated source image and the replicas copied from it (one catalog
row per region). ``apply_retention`` orders the stack's promoted groups by when their
promotion finished, keeps the newest ``keep_last`` and deprecates every region row of the
others, with the newest kept image of the same region as the replacement (AWS
``enable_image_deprecation``, Google Cloud ``deprecate`` with ``replacement``, Azure
``end_of_life_date``: each provider's ``deprecate``).

Protection (``in_use``): a row is never deprecated or deleted while a "latest" pointer
names it (in the catalog or in the cloud) or a running instance uses its image id; it is
skipped with a ``retention.kept`` event saying why, and retried next time.

``deprecate_image`` deprecates one group on request (``imagectl deprecate IMAGE``);
``delete_image`` deletes a deprecated, rolled-back or blocked group with the same
protection.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Image, Pointer, Promotion
from imagectl.clouds.base import Instance, Provider
from imagectl.clouds.registry import cloud_spec
from imagectl.core.errors import EXIT_FAILED, UserError
from imagectl.promotion.groups import group_rows
from imagectl.promotion.records import TAG_SOURCE
from imagectl.promotion.resolve import ImageRef, resolve_image


@dataclass
class RetentionOutcome:
    deprecated: list[str] = field(default_factory=list)  # "<cloud id> in <region>"
    skipped: list[str] = field(default_factory=list)  # "<cloud id> in <region>: <why>"
    deleted: list[str] = field(default_factory=list)


def _global_image(cloud: str) -> bool:
    """One image id serves every region of ``cloud`` (its spec's ``image_scope``: a GCP
    image, an Azure gallery version): deprecating it anywhere deprecates it everywhere, so
    an instance in any region protects it, and a group is deprecated as a whole or not at
    all."""
    return cloud_spec(cloud).image_scope == "global"


class ImageInUse(UserError):
    """The image is still named by a pointer or used by an instance (exit 1)."""

    exit_code = EXIT_FAILED


def sources(session: Session, stack: str, cloud: str, states: tuple[str, ...]) -> list[Image]:
    """Source (validated, non-replica) images of a stack in ``states``."""
    rows = repo.list_images(session, stack=stack, cloud=cloud, state=list(states))
    return [r for r in rows if TAG_SOURCE not in r.tags]


def group(session: Session, source: Image) -> list[Image]:
    return group_rows(session, source)


def _promoted_at(session: Session, source: Image) -> dt.datetime:
    query = select(Promotion.finished_at).where(
        Promotion.image_id == source.id, Promotion.state == "succeeded"
    )
    times = [t for t in session.scalars(query) if t is not None]
    return max(times) if times else source.state_changed_at


def in_use(
    session: Session, provider: Provider, row: Image, instances: list[Instance]
) -> str | None:
    """Why ``row`` must not be deprecated or deleted, or None."""
    query = select(Pointer).where(or_(Pointer.image_id == row.id))
    for ptr in session.scalars(query):
        return f"latest of {ptr.stack} in {ptr.region} (catalog)"
    try:
        cloud_ptr = provider.get_pointer(row.stack, row.region)
    except Exception as error:  # cannot tell: keep it
        return f"cannot read the cloud pointer ({error})"
    if cloud_ptr == row.cloud_image_id:
        return f"latest of {row.stack} in {row.region} (cloud)"
    users = [
        i.instance_id
        for i in instances
        if i.image_id == row.cloud_image_id
        and (_global_image(row.cloud) or i.region.startswith(row.region))
    ]
    if users:
        return f"used by running instance(s) {', '.join(sorted(users))}"
    return None


def _instances(provider: Provider) -> list[Instance]:
    return [
        i
        for i in provider.list_instances(managed_only=False)
        if i.state not in ("terminated", "stopped", "deleted", "shutting-down")
    ]


def _deprecate_row(
    s: Session,
    provider: Provider,
    row: Image,
    replacement: Image | None,
    reason: str,
    actor: str | None,
) -> None:
    """Deprecate in the cloud, then in the catalog: a cloud error leaves the row as it was."""
    cloud_img = provider.get_image(row.cloud_image_id, row.region)
    repl = (
        provider.get_image(replacement.cloud_image_id, replacement.region) if replacement else None
    )
    if cloud_img is not None:
        provider.deprecate(cloud_img, replacement=repl)
    repo.set_state(
        s,
        row,
        ImageState.DEPRECATED,
        reason=reason,
        actor=actor,
        details={"replacement": replacement.cloud_image_id if replacement else None},
    )


def apply_retention(
    catalog: Catalog,
    provider: Provider,
    stack: str,
    cloud: str,
    *,
    keep_last: int,
    actor: str | None = None,
) -> RetentionOutcome:
    """Deprecate promoted groups beyond the newest ``keep_last`` (unless in use)."""
    out = RetentionOutcome()
    instances = _instances(provider)
    with catalog.transaction() as s:
        # a group stays a candidate while any of its rows is promoted (a row kept for an
        # instance is retried next time, even though the rest of its group is deprecated)
        promoted = [
            src
            for src in sources(s, stack, cloud, (ImageState.PROMOTED, ImageState.DEPRECATED))
            if any(r.state == ImageState.PROMOTED for r in group(s, src))
        ]
        promoted.sort(key=lambda r: (_promoted_at(s, r), r.id), reverse=True)
        kept, old = promoted[:keep_last], promoted[keep_last:]
        newest_by_region = {}
        for src in reversed(kept):
            for row in group(s, src):
                newest_by_region[row.region] = row
        for src in old:
            rows = [r for r in group(s, src) if r.state == ImageState.PROMOTED]
            reasons = {r.id: in_use(s, provider, r, instances) for r in rows}
            if _global_image(cloud) and any(reasons.values()):
                first = next(w for w in reasons.values() if w)
                reasons = {pk: w or f"same image is {first}" for pk, w in reasons.items()}
            for row in rows:
                label = f"{row.cloud_image_id} in {row.region}"
                why = reasons[row.id]
                if why:
                    out.skipped.append(f"{label}: {why}")
                    repo.log_event(
                        s,
                        "retention.kept",
                        f"{label} kept beyond keep_last={keep_last}: {why}",
                        image=row,
                        actor=actor,
                        details={"region": row.region, "why": why},
                    )
                    continue
                try:
                    _deprecate_row(
                        s,
                        provider,
                        row,
                        newest_by_region.get(row.region),
                        f"retention: beyond keep_last={keep_last}",
                        actor,
                    )
                except Exception as error:  # retention never fails a finished promotion
                    out.skipped.append(f"{label}: deprecation failed: {error}")
                    continue
                out.deprecated.append(label)
    return out


def _refuse_if_in_use(
    s: Session, provider: Provider, src: Image, rows: list[Image], instances: list[Instance]
) -> None:
    """ImageInUse naming every row a pointer or a running instance still uses."""
    busy = [
        f"{r.cloud_image_id} in {r.region}: {why}"
        for r in rows
        if (why := in_use(s, provider, r, instances))
    ]
    if busy:
        raise ImageInUse(
            f"image {src.label} is still in use: {'; '.join(busy)}",
            hint="Promote a newer image or roll back first, and stop the instances",
        )


def deprecate_image(
    catalog: Catalog, provider: Provider, image: ImageRef, *, reason: str, actor: str | None = None
) -> RetentionOutcome:
    """Deprecate every region row of one image group; refuses rows still in use."""
    out = RetentionOutcome()
    instances = _instances(provider)
    with catalog.transaction() as s:
        src = resolve_image(s, image, cloud=provider.cloud)
        rows = [
            r for r in group(s, src) if r.state not in (ImageState.DEPRECATED, ImageState.DELETED)
        ]
        _refuse_if_in_use(s, provider, src, rows, instances)
        for row in rows:
            _deprecate_row(s, provider, row, None, reason, actor)
            out.deprecated.append(f"{row.cloud_image_id} in {row.region}")
        repo.log_event(
            s,
            "image.deprecated",
            f"{src.label} deprecated: {reason}",
            image=src,
            actor=actor,
            details={"rows": out.deprecated},
        )
    return out


def delete_image(
    catalog: Catalog, provider: Provider, image: ImageRef, *, reason: str, actor: str | None = None
) -> RetentionOutcome:
    """Delete a deprecated / rolled-back / blocked group; refuses rows still in use."""
    out = RetentionOutcome()
    instances = _instances(provider)
    with catalog.transaction() as s:
        src = resolve_image(s, image, cloud=provider.cloud)
        rows = [r for r in group(s, src) if r.state != ImageState.DELETED]
        wrong = [
            r
            for r in rows
            if r.state not in (ImageState.DEPRECATED, ImageState.ROLLED_BACK, ImageState.BLOCKED)
        ]
        if wrong:
            raise UserError(
                f"image {src.label} cannot be deleted: "
                + ", ".join(f"{r.region} is {r.state}" for r in wrong),
                hint="Deprecate it first (`imagectl deprecate IMAGE`)",
            )
        _refuse_if_in_use(s, provider, src, rows, instances)
        for row in rows:
            cloud_img = provider.get_image(row.cloud_image_id, row.region)
            if cloud_img is not None:
                provider.delete(cloud_img)
            repo.set_state(s, row, ImageState.DELETED, reason=reason, actor=actor)
            out.deleted.append(f"{row.cloud_image_id} in {row.region}")
    return out
