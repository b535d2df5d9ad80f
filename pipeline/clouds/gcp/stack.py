"""Google Cloud's section of a stack file (``clouds.gcp``): the base image, the build
project, zone and machine type, the production image family and the validation
reservation, the patterns of Compute Engine's names, and the check of its zone and storage
location names. Registered with the stack schema through ``SECTION``
(``imagectl.stacks.sections``).

Sources of the patterns: resource names (RFC 1035 labels),
https://cloud.google.com/compute/docs/naming-resources; project ids,
https://cloud.google.com/resource-manager/docs/creating-managing-projects.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from imagectl.clouds.gcp.pointers import problems as pointer_problems
from imagectl.stacks.findings import Finding
from imagectl.stacks.locations import (
    Loc,
    cloud_locations,
    target_regions,
    unknown_location,
    unknown_locations,
)
from imagectl.stacks.patterns import pattern
from imagectl.stacks.schema import CloudCommon, Strict, UnsetNotWritten
from imagectl.stacks.sections import CloudSection

GcpLabel = Annotated[str, pattern(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", 63)]
GcpProject = Annotated[str, pattern(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", 30)]
GcpZone = Annotated[str, pattern(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$", 40)]
# A reservation by name, or a shared one as projects/<project>/reservations/<name>
# (Compute API reference, ReservationAffinity.values)
GcpReservation = Annotated[
    str,
    pattern(
        r"^(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        120,
    ),
]


class GcpBaseImage(UnsetNotWritten):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("image",)

    project: GcpProject
    family: GcpLabel
    image: GcpLabel | None = Field(
        None,
        description="the base image pinned by name (in project); unset: plan and build "
        "resolve the family (images.getFromFamily) and record the image they used",
    )


class GcpBuild(Strict):
    project: GcpProject
    zone: GcpZone
    machine_type: GcpLabel


class GcpCapacity(Strict):
    """A specific reservation the validation instances consume (A3 H100 shapes are rarely
    available on demand): ``reservationAffinity`` SPECIFIC_RESERVATION by name."""

    reservation: GcpReservation = Field(
        description="reservation name, or projects/<project>/reservations/<name> if shared"
    )
    zone: GcpZone = Field(description="the reservation's zone (validation launches only there)")


class GcpCloud(CloudCommon):
    SHARING: ClassVar[dict[str, str]] = {
        name: "Compute Engine shares an image with IAM members (roles/compute.imageUser); "
        "name them in share.principals, e.g. group:ml@example.com"
        for name in ("accounts", "organizations")
    }

    base_image: GcpBaseImage
    build: GcpBuild
    family: GcpLabel = Field(
        description="production image family (the latest pointer; its canary is "
        "<family>-canary, so at most 56 characters)"
    )
    # validation instances consume this reservation (its zone only)
    validation_capacity: GcpCapacity | None = None

    @model_validator(mode="after")
    def _pointer_families(self) -> GcpCloud:
        """Both pointers' families are names Compute accepts, and the canary's is never
        the production family (``imagectl.clouds.gcp.pointers``)."""
        found = pointer_problems(self.family)
        if found:
            raise ValueError("family: " + "; ".join(found))
        return self


def location_findings(gcp: GcpCloud, compat_dir: Path) -> Iterator[Finding]:
    """The build zone and the reservation's zone against Compute Engine's zones, and the
    target regions against the storage locations an image can have (images/compat/
    regions.yaml ``gcp``)."""
    known = cloud_locations(compat_dir, "gcp", "zones", "storage_multi_regions", "storage_source")
    all_zones = frozenset(f"{r}-{z}" for r, letters in known["zones"].items() for z in letters)
    multi = tuple(known["storage_multi_regions"])
    storage = frozenset(multi) | frozenset(known["zones"])
    aliases: dict[str, str] = dict(known.get("storage_aliases") or {})
    zones: list[tuple[Loc, str]] = [(("clouds", "gcp", "build", "zone"), gcp.build.zone)]
    if gcp.validation_capacity is not None:
        zones.append(
            (("clouds", "gcp", "validation_capacity", "zone"), gcp.validation_capacity.zone)
        )
    yield from unknown_locations(zones, "a Compute Engine zone", all_zones, known["source"])
    for loc, name in target_regions("gcp", gcp.regions):
        if name not in storage:
            yield unknown_location(
                loc,
                name,
                "a Cloud Storage location an image can be stored in (clouds.gcp.regions "
                "are the promoted image's storageLocations: a multi-region or a region)",
                storage,
                known["storage_source"],
                suggestion=aliases.get(name),
                also=f"the multi-regions are {', '.join(multi)}; ",
            )


SECTION = CloudSection(
    name="gcp", model=GcpCloud, checks=(location_findings,), written_when_absent=True
)
