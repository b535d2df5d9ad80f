"""Read-only views for other parts (drift, status, the local end-to-end run)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.promotion.groups import resume_command
from imagectl.promotion.rollback import open_flip


def current_pointers(catalog: Catalog, stack: str, cloud: str) -> dict[str, str]:
    """region -> the cloud image id the catalog says "latest" names (what drift expects)."""
    with catalog.transaction() as s:
        return {
            p.region: p.image.cloud_image_id
            for p in repo.list_pointers(s, stack=stack, cloud=cloud)
        }


def promotion_events(
    catalog: Catalog, stack: str, cloud: str | None = None
) -> list[dict[str, Any]]:
    """Every promotion, rollback, retention and pointer event of a stack, oldest first."""
    prefixes = ("promotion.", "pointer.", "rollback.", "retention.", "image.")
    with catalog.transaction() as s:
        rows = [e for e in repo.events(s, stack=stack, cloud=cloud) if e.kind.startswith(prefixes)]
        return [
            {
                "at": e.at.isoformat(),
                "actor": e.actor,
                "kind": e.kind,
                "message": e.message,
                "image_id": e.image_id,
                "details": e.details,
            }
            for e in reversed(rows)
        ]


def unfinished_flip(session: Session, stack: str, cloud: str) -> dict[str, Any] | None:
    """The pointer flip of ``stack`` on ``cloud`` that started and did not finish, as
    plain data for ``status``: which regions moved, which did not, how to finish it."""
    found = open_flip(session, stack, cloud)
    if found is None:
        return None
    promo, flips = found
    regions = list(promo.target_regions)
    return {
        "promotion": promo.id,
        "image": promo.image.cloud_image_id,
        "done": [f.region for f in flips if f.state == "done"],
        "pending": [f.region for f in flips if f.state == "pending"],
        "finish": resume_command(promo.image, cloud, regions, regions),
        "undo": f"imagectl rollback --stack {stack} --cloud {cloud}",
    }
