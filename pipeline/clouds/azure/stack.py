"""Azure's section of a stack file (``clouds.azure``): the marketplace base image, the
build subscription, location and size, the Compute Gallery and the validation capacity
reservation group, the patterns of Azure's resource names, and the check of its location
names. Registered with the stack schema through ``SECTION`` (``imagectl.stacks.sections``).

Sources of the patterns: https://learn.microsoft.com/azure/azure-resource-manager/
management/resource-name-rules (resource groups, galleries, image definitions).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from imagectl.clouds.azure.pointers import problems as pointer_problems
from imagectl.clouds.azure.vm_sizes import gen2_only
from imagectl.stacks.findings import Finding
from imagectl.stacks.locations import Loc, cloud_locations, target_regions, unknown_locations
from imagectl.stacks.patterns import pattern
from imagectl.stacks.schema import CloudCommon, Strict, UnsetNotWritten
from imagectl.stacks.sections import CloudSection

AzureName = Annotated[str, pattern(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,78}[A-Za-z0-9_]$", 80)]
AzureGroup = Annotated[str, pattern(r"^[A-Za-z0-9._()-]{0,89}[A-Za-z0-9_()-]$", 90)]
AzureGuid = Annotated[
    str, pattern(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
]
AzureLocation = Annotated[str, pattern(r"^[a-z0-9]{2,40}$", 40)]
AzureVmSize = Annotated[str, pattern(r"^[A-Za-z0-9_]{2,64}$", 64)]
# An Azure marketplace image version: Major.Minor.Build (Virtual Machine Images - List)
AzureImageVersion = Annotated[str, pattern(r"^[0-9]{1,10}\.[0-9]{1,10}\.[0-9]{1,20}$", 42)]
# A capacity reservation group's resource id (Compute REST API, Capacity Reservation Groups)
AzureReservationGroup = Annotated[
    str,
    pattern(
        r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[A-Za-z0-9._()-]{1,90}/providers/"
        r"Microsoft\.Compute/capacityReservationGroups/[A-Za-z0-9][A-Za-z0-9._-]{0,78}[A-Za-z0-9_]$",
        400,
    ),
]


class AzureBaseImage(UnsetNotWritten):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("version",)

    publisher: AzureName
    offer: AzureName
    sku: AzureName
    version: AzureImageVersion | None = Field(
        None,
        description="the marketplace image version pinned, e.g. 22.04.202501150; unset: plan "
        "and build resolve the newest version of publisher/offer/sku and record it",
    )


class AzureGallery(Strict):
    resource_group: AzureGroup
    name: AzureName
    image_definition: AzureName
    # TargetRegion.regionalReplicaCount / storageAccountType (Compute Gallery REST API)
    replica_count: int = Field(
        1, ge=1, le=100, description="replicas of each version per target region"
    )
    storage_account_type: Literal["Standard_LRS", "Standard_ZRS", "Premium_LRS"] = Field(
        "Standard_LRS", description="storage of each region's replicas"
    )
    # The definition's boot properties, fixed at its creation (pipeline/clouds/azure/
    # definition.py): Generation 2 for the GPU sizes; Standard security, because
    # Trusted Launch's Secure Boot loads no DKMS-built NVIDIA module (AZURE-SECURE-BOOT-DKMS)
    hyper_v_generation: Literal["V1", "V2"] = Field("V2", description="VM generation")
    security_type: Literal["Standard", "TrustedLaunchSupported", "TrustedLaunch"] = Field(
        "Standard", description="the definition's SecurityType feature (Standard: none)"
    )


class AzureBuild(Strict):
    subscription_id: AzureGuid
    location: AzureLocation
    vm_size: AzureVmSize
    resource_group: AzureGroup


class AzureCapacity(Strict):
    """A capacity reservation group the validation VMs are placed in (ND H100 v5 is
    rarely available on demand): the VM's ``capacityReservation.capacityReservationGroup``
    (Compute REST API, Virtual Machines - Create Or Update)."""

    reservation_group: AzureReservationGroup = Field(
        description="capacity reservation group resource id"
    )
    zone: Literal["1", "2", "3"] | None = Field(
        None, description="the reservation's availability zone (validation launches only there)"
    )


class AzureCloud(CloudCommon):
    SHARING: ClassVar[dict[str, str]] = {
        **{
            name: "an Azure Compute Gallery is shared with subscriptions and tenants; name "
            "them in share.principals (a subscription id, or tenant:<id>)"
            for name in ("accounts", "organizations")
        },
        "public": "Azure publishes a gallery only as a community gallery (a property of the "
        "gallery, with a publisher contact and EULA), which imagectl does not create; "
        "share with subscriptions or tenants in share.principals",
    }

    base_image: AzureBaseImage
    build: AzureBuild
    gallery: AzureGallery
    # validation VMs are placed in this capacity reservation group (its zone only)
    validation_capacity: AzureCapacity | None = None

    @property
    def security_type(self) -> str | None:
        return self.gallery.security_type

    @model_validator(mode="after")
    def _pointer_names(self) -> AzureCloud:
        """What names latest (the gallery's image definition) and the canary (a tag) are
        names ARM accepts (``imagectl.clouds.azure.pointers``)."""
        found = pointer_problems(self.gallery.name, self.gallery.image_definition)
        if found:
            raise ValueError("gallery: " + "; ".join(found))
        return self


def location_findings(az: AzureCloud, compat_dir: Path) -> Iterator[Finding]:
    """The build location and the target regions against Azure's location names
    (images/compat/regions.yaml ``azure.locations``)."""
    known = cloud_locations(compat_dir, "azure", "locations")
    places: list[tuple[Loc, str]] = [
        (("clouds", "azure", "build", "location"), az.build.location),
        *target_regions("azure", az.regions),
    ]
    locations = frozenset(known["locations"])
    yield from unknown_locations(places, "an Azure location", locations, known["source"])


def launch_findings(az: AzureCloud, compat_dir: Path) -> Iterator[Finding]:
    """What Azure refuses at launch and the stack decides before: a validation size that
    boots Generation 2 only, with a V1 image definition (pipeline/clouds/azure/vm_sizes.yaml)."""
    if az.gallery.hyper_v_generation == "V2":
        return
    for size in az.validation_shapes:
        source = gen2_only(size)
        if source:
            yield Finding(
                "AZURE-GEN2-ONLY",
                "error",
                ("clouds", "azure", "gallery", "hyper_v_generation"),
                f"{size} boots Generation 2 VMs only, and the image definition is "
                "hyperVGeneration V1: Azure refuses the validation VM",
                "set clouds.azure.gallery.hyper_v_generation: V2 (a new definition: Azure "
                "cannot change an existing one's generation)",
                source,
            )


SECTION = CloudSection(
    name="azure",
    model=AzureCloud,
    fabrics=frozenset({"infiniband"}),
    checks=(location_findings, launch_findings),
    written_when_absent=True,
)
