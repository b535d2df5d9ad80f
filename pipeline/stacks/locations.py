"""Region, zone and storage location names each cloud accepts (images/compat/regions.yaml),
and the stack fields that name one: a typo (``us-eats-2``) or a name the cloud does not
have (``europe`` as a Cloud Storage location) is found before any build, with the nearest
known name suggested."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import load_data
from imagectl.stacks.findings import Finding
from imagectl.stacks.schema import Stack

RULE = "LOCATION-UNKNOWN"


@dataclass(frozen=True)
class CloudLocations:
    aws_regions: frozenset[str]
    aws_source: str
    gcp_zones: frozenset[str]
    gcp_regions: frozenset[str]
    gcp_source: str
    gcp_storage: frozenset[str]  # an image's storageLocations: multi-regions and regions
    gcp_storage_multi: tuple[str, ...]
    gcp_storage_aliases: dict[str, str]
    gcp_storage_source: str
    azure_locations: frozenset[str]
    azure_source: str


@lru_cache(maxsize=4)
def load_locations(compat_dir: Path) -> CloudLocations:
    path = compat_dir / "regions.yaml"
    doc = load_data(path)
    try:
        aws, gcp, azure = doc["aws"], doc["gcp"], doc["azure"]
        zones = {f"{r}-{z}" for r, letters in gcp["zones"].items() for z in letters}
        regions = frozenset(gcp["zones"])
        multi = tuple(gcp["storage_multi_regions"])
        return CloudLocations(
            aws_regions=frozenset(aws["regions"]),
            aws_source=aws["source"],
            gcp_zones=frozenset(zones),
            gcp_regions=regions,
            gcp_source=gcp["source"],
            gcp_storage=frozenset(multi) | regions,
            gcp_storage_multi=multi,
            gcp_storage_aliases=dict(gcp.get("storage_aliases") or {}),
            gcp_storage_source=gcp["storage_source"],
            azure_locations=frozenset(azure["locations"]),
            azure_source=azure["source"],
        )
    except (KeyError, TypeError) as exc:
        raise UserError(
            f"{path} lacks {exc}: it needs aws.regions, gcp.zones, gcp.storage_multi_regions "
            "and azure.locations, each with its source"
        ) from exc


def nearest(name: str, known: frozenset[str] | set[str]) -> str | None:
    found = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def _unknown(
    loc: tuple[str | int, ...],
    name: str,
    kind: str,
    known: frozenset[str],
    source: str,
    *,
    suggestion: str | None = None,
    also: str = "",
) -> Finding:
    near = suggestion or nearest(name, known)
    hint = f"did you mean '{near}'? " if near else ""
    return Finding(
        RULE,
        "error",
        loc,
        f"'{name}' is not {kind}",
        f"{hint}{also}use a name from images/compat/regions.yaml (add a new one there "
        "with its source)",
        source,
    )


def location_findings(stack: Stack, compat_dir: Path) -> Iterator[Finding]:
    """Every region, zone or location name of the stack's aws/gcp/azure sections that the
    cloud does not have (the local cloud's regions are folders: any name)."""
    known = load_locations(compat_dir)
    clouds = stack.clouds
    if clouds.aws is not None:
        aws = clouds.aws
        what = "an AWS region"
        names: list[tuple[tuple[str | int, ...], str]] = [
            (("clouds", "aws", "build", "region"), aws.build.region),
            *((("clouds", "aws", "regions", i), r) for i, r in enumerate(aws.regions)),
            *((("clouds", "aws", "kms_key_ids", r), r) for r in aws.kms_key_ids),
        ]
        for loc, name in names:
            if name not in known.aws_regions:
                yield _unknown(loc, name, what, known.aws_regions, known.aws_source)
    if clouds.gcp is not None:
        gcp = clouds.gcp
        zones: list[tuple[tuple[str | int, ...], str]] = [
            (("clouds", "gcp", "build", "zone"), gcp.build.zone)
        ]
        if gcp.validation_capacity is not None:
            zones.append(
                (("clouds", "gcp", "validation_capacity", "zone"), gcp.validation_capacity.zone)
            )
        for loc, name in zones:
            if name not in known.gcp_zones:
                yield _unknown(
                    loc, name, "a Compute Engine zone", known.gcp_zones, known.gcp_source
                )
        multi = ", ".join(known.gcp_storage_multi)
        for i, name in enumerate(gcp.regions):
            if name not in known.gcp_storage:
                yield _unknown(
                    ("clouds", "gcp", "regions", i),
                    name,
                    "a Cloud Storage location an image can be stored in (clouds.gcp.regions "
                    "are the promoted image's storageLocations: a multi-region or a region)",
                    known.gcp_storage,
                    known.gcp_storage_source,
                    suggestion=known.gcp_storage_aliases.get(name),
                    also=f"the multi-regions are {multi}; ",
                )
    if clouds.azure is not None:
        az = clouds.azure
        places: list[tuple[tuple[str | int, ...], str]] = [
            (("clouds", "azure", "build", "location"), az.build.location),
            *((("clouds", "azure", "regions", i), r) for i, r in enumerate(az.regions)),
        ]
        for loc, name in places:
            if name not in known.azure_locations:
                yield _unknown(
                    loc, name, "an Azure location", known.azure_locations, known.azure_source
                )
