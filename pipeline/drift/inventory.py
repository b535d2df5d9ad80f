"""The one adapter between drift and the rest of the controller: clouds and catalog.

- ``provider(cloud)``: ``imagectl.clouds.get_provider`` (SDKs imported lazily).
- ``promoted_images(stack, cloud)``: promoted (or partially promoted) images from the
  catalog (``imagectl.catalog.repository.list_images``), as ``CloudImage`` records.
- ``catalog_receipts(stack)``: boot/validation receipts stored for those images.
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.base import CloudImage, Provider
from imagectl.errors import UserError

PROMOTED = ("promoted", "partially_promoted")
TAG_SOURCE = "imagectl:source-image"  # set by promotion on replica rows (the source's id)


def provider(cloud: str) -> Provider:
    from imagectl.clouds import get_provider

    return get_provider(cloud)


def _catalog() -> Any:
    try:
        from imagectl.catalog import repository
        from imagectl.catalog.db import open_catalog
    except ImportError as exc:  # pragma: no cover - the catalog ships with imagectl
        raise UserError(
            f"the image catalog is not available ({exc})",
            hint="Install imagectl with its catalog, or pick --upstream / --hosts DIR",
        ) from exc
    return open_catalog(), repository


def promoted_images(stack: str, cloud: str) -> list[CloudImage]:
    """Promoted source images (the validated image each promotion copied from)."""
    catalog, repo = _catalog()
    with catalog.transaction() as s:
        rows = [
            r
            for r in repo.list_images(s, stack=stack, cloud=cloud, state=list(PROMOTED))
            if TAG_SOURCE not in (r.tags or {})
        ]
        return [
            CloudImage(
                cloud=r.cloud,
                region=r.region,
                image_id=r.cloud_image_id,
                state=r.state,
                tags={str(k): str(v) for k, v in (r.tags or {}).items()},
                created_at=r.created_at,
            )
            for r in rows
        ]


def catalog_receipts(stack: str) -> list[tuple[str, dict[str, Any]]]:
    """(label, receipt) of every receipt stored for the stack's promoted images."""
    catalog, repo = _catalog()
    out: list[tuple[str, dict[str, Any]]] = []
    with catalog.transaction() as s:
        for img in repo.list_images(s, stack=stack, state=list(PROMOTED)):
            for run in repo.receipts(s, img):
                out.append((f"catalog:{img.cloud}/{img.region}/{run.host}", dict(run.receipt)))
    return out
