"""ARM resources as imagectl reads them: gallery version ids, replication states,
locations with a zone, version ordering."""

from __future__ import annotations

import re

VERSION_ID = re.compile(
    r"/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/galleries/(?P<gallery>[^/]+)"
    r"/images/(?P<definition>[^/]+)/versions/(?P<version>[^/]+)$",
    re.IGNORECASE,
)
# A gallery image version's regional replication state -> imagectl's replica state.
REPLICATION = {"Completed": "available", "Replicating": "pending", "Failed": "failed"}


def split_location(location: str) -> tuple[str, str | None]:
    """``eastus/2`` -> (``eastus``, ``2``); ``eastus`` -> (``eastus``, None)."""
    region, _, zone = location.partition("/")
    return region, zone or None


def version_key(version: str) -> tuple[int, ...]:
    """``1.2.10`` sorts after ``1.2.9``."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))
