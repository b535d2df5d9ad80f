"""An image group (the validated source row and the replica rows copied from it) and
the command that resumes its promotion."""

from __future__ import annotations

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.models import Image
from imagectl.promotion import records as rec


def resume_command(image: Image, cloud: str, regions: list[str], all_regions: list[str]) -> str:
    cmd = f"imagectl promote {image.cloud_image_id} --stack {image.stack} --cloud {cloud}"
    if sorted(regions) != sorted(all_regions):
        cmd += f" --regions {','.join(regions)}"
    return cmd


def group_rows(session: Session, source: Image) -> list[Image]:
    """The source image row and every replica row copied from it (all regions)."""
    rows = repo.list_images(session, stack=source.stack, cloud=source.cloud)
    return [r for r in rows if r.id == source.id or r.tags.get(rec.TAG_SOURCE) == source.id]
