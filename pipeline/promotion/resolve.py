"""Which catalog image a command means: ``resolve_image`` takes a catalog id, an
``Image`` row or a cloud image id (what a person types) and returns the one image, or
explains in one paragraph (exit 2) why there is none; ``image_to_promote`` picks the
image ``promote`` means when only a stack is named."""

from __future__ import annotations

from typing import TypeAlias

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Image
from imagectl.core.errors import UserError
from imagectl.promotion import records as rec

# what a caller may name an image by
ImageRef: TypeAlias = int | str | Image


def resolve_image(
    session: Session,
    ref: ImageRef,
    *,
    stack: str | None = None,
    cloud: str | None = None,
    allow_replica: bool = False,
) -> Image:
    """The catalog ``Image`` for a catalog id, an ``Image`` or a cloud image id.

    A cloud id present in several regions (GCP, local) resolves to the source image, not
    to its replicas. Unknown or ambiguous references are bad input (exit 2), and so is a
    replica unless ``allow_replica`` (read-only commands such as ``verify``).
    """
    if isinstance(ref, Image):
        found = repo.get_image(session, ref.id)
    elif isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        found = repo.get_image(session, int(ref))
    else:
        rows = [
            r
            for r in repo.list_images(session, stack=stack, cloud=cloud)
            if r.cloud_image_id == ref
        ]
        sources = [r for r in rows if rec.TAG_SOURCE not in r.tags] or rows
        if len(sources) > 1:
            where = ", ".join(f"{r.id} ({r.cloud}/{r.region})" for r in sources)
            raise UserError(
                f"image {ref} is ambiguous: catalog ids {where}",
                hint="Pass the catalog id instead, or --stack and --cloud",
            )
        found = sources[0] if sources else None
    if found is None:
        scope = " ".join(
            x for x in (f"stack {stack}" if stack else "", f"cloud {cloud}" if cloud else "") if x
        )
        raise UserError(
            f"unknown image '{ref}'{' in ' + scope if scope else ''}",
            hint="Run `imagectl status` to list images and their catalog ids",
        )
    if stack and found.stack != stack:
        raise UserError(f"image {found.label} belongs to stack {found.stack}, not {stack}")
    if cloud and found.cloud != cloud:
        raise UserError(f"image {found.label} is on cloud {found.cloud}, not {cloud}")
    if rec.TAG_SOURCE in found.tags and not allow_replica:
        raise UserError(
            f"image {found.label} is a replica of image {found.tags[rec.TAG_SOURCE]}",
            hint="Promote, roll back or block the source image",
        )
    return found


def image_to_promote(
    catalog: Catalog, ref: str | None, stack: str | None, cloud: str | None
) -> tuple[int, str, str]:
    """(catalog id, stack, cloud) of IMAGE, or of the stack's image to promote next:
    an interrupted promotion first, else the newest validated image."""
    with catalog.transaction() as s:
        if ref:
            img = resolve_image(s, ref, stack=stack, cloud=cloud)
            return img.id, img.stack, img.cloud
        if not stack:
            raise UserError("name an IMAGE or pass --stack", hint="See `imagectl promote --help`")
        for states in (
            (ImageState.PROMOTING, ImageState.PARTIALLY_PROMOTED),
            (ImageState.VALIDATED,),
        ):
            rows = [
                r
                for r in repo.list_images(s, stack=stack, cloud=cloud, state=list(states))
                if rec.TAG_SOURCE not in r.tags
            ]
            if rows:
                return rows[0].id, rows[0].stack, rows[0].cloud
        raise UserError(
            f"stack {stack} has no validated image{' on ' + cloud if cloud else ''} to promote",
            hint="Validate an image first, or name one (`imagectl status` lists them)",
        )
