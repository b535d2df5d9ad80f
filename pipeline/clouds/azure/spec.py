"""Azure: a Shared Image Gallery version built by Packer's azure-arm builder in one
location; replication is one region list on that version, so copies go one at a time."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from imagectl.clouds.azure.stack import SECTION, AzureCloud
from imagectl.clouds.spec import ArtifactRef, CloudSpec, ProviderOptions

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack


INT32_MAX = 2**31 - 1  # each part of a gallery image version is a 32-bit integer


def gallery_image_version(build_id: str) -> str:
    """The build's gallery image version (MAJOR.MINOR.PATCH, each a 32-bit integer;
    Gallery Image Versions - Create Or Update): unique per build, not per second.

    ``20261122-042530-ab12cd`` -> ``2026.1122042530.11211469``: the year, then month, day
    and time (at most 1231235959, sortable within the year), then the build id's random
    suffix. Two stacks built in the same second get different versions. A build id of
    another form (``--build-id``) is hashed into the minor and patch numbers."""
    parts = build_id.split("-")
    date, time = [*parts, "", ""][:2]
    suffix = "-".join(parts[2:])
    if (
        len(date) == 8 and date.isdigit() and len(time) == 6 and time.isdigit()
        and suffix and all(c in "0123456789abcdef" for c in suffix) and len(suffix) <= 7
    ):  # fmt: skip
        return f"{int(date[:4])}.{int(date[4:] + time)}.{int(suffix, 16)}"
    digest = hashlib.sha256(build_id.encode()).digest()
    minor = int.from_bytes(digest[:4], "big") & INT32_MAX
    patch = int.from_bytes(digest[4:8], "big") & INT32_MAX
    return f"0.{minor}.{patch}"


# The user a validation VM's key is given to: osProfile.adminUsername with the key in
# linuxConfiguration.ssh.publicKeys (Virtual Machines - Create Or Update, ARM REST)
LOGIN_USER = "imagectl"


@dataclass(frozen=True, kw_only=True)
class AzureOptions(ProviderOptions):
    """What ``AzureProvider`` is built from: the stack's clouds.azure section
    (``provider_options``), the environment and a caller's overrides. A misspelt
    option is a TypeError here, never silently dropped."""

    subscription_id: str
    location: str
    gallery_resource_group: str
    gallery: str
    image_definition: str
    resource_group: str | None = None
    subnet_id: str | None = None
    zones: list[str] | None = None
    endpoint: str | None = None
    credential: Any = None
    polling_interval: float = 15.0
    poll_interval_s: float | None = None
    retry_total: int = 8
    retry_backoff_factor: float = 0.8
    regions: list[str] | None = None
    replica_count: int = 1
    storage_account_type: str = "Standard_LRS"
    write_timeout_s: float = 6 * 3600.0
    reservation_group: str | None = None
    reservation_zone: str | None = None
    hyper_v_generation: str = "V2"
    security_type: str = "Standard"
    login_user: str = LOGIN_USER

    def polled(self, seconds: float) -> AzureOptions:
        return replace(
            self, polling_interval=seconds, poll_interval_s=seconds, retry_backoff_factor=seconds
        )

    def in_regions(self, regions: list[str]) -> AzureOptions:
        return replace(self, regions=regions)


class AzureSpec(CloudSpec[AzureCloud]):
    name = "azure"
    section = SECTION
    image_scope = "global"
    packer_builder = "azure-arm"
    provider_module = "imagectl.clouds.azure.provider"
    doctor_module = "imagectl.clouds.azure.doctor"
    options_type = AzureOptions
    replicate_serially = True
    fabrics = SECTION.fabrics
    # waagent's own generalisation, last: after Ansible's hygiene role ("Create a
    # generalized image", Azure docs: waagent -deprovision+user)
    deprovision_command = "/usr/sbin/waagent -force -deprovision+user && export HISTSIZE=0 && sync"

    def packer_vars(
        self, r: ResolvedStack, settings: AzureCloud, *, build_id: str
    ) -> dict[str, Any]:
        return {
            "azure_subscription_id": settings.build.subscription_id,
            "azure_location": settings.build.location,
            "azure_vm_size": settings.build.vm_size,
            "azure_build_resource_group": settings.build.resource_group,
            "azure_image_publisher": settings.base_image.publisher,
            "azure_image_offer": settings.base_image.offer,
            "azure_image_sku": settings.base_image.sku,
            "azure_gallery_resource_group": settings.gallery.resource_group,
            "azure_gallery_name": settings.gallery.name,
            "azure_gallery_image_definition": settings.gallery.image_definition,
            "azure_gallery_image_version": gallery_image_version(build_id),
            # the home region's replicas, as every other region's (gallery settings)
            "azure_replica_count": settings.gallery.replica_count,
            "azure_storage_account_type": settings.gallery.storage_account_type,
        }

    base_image_packer_var = "azure_image_version"

    def base_image_query(self, settings: AzureCloud) -> str:
        b = settings.base_image
        return f"{b.publisher}:{b.offer}:{b.sku} in {settings.build.location}"

    def pinned_base_image(self, settings: AzureCloud) -> str | None:
        return settings.base_image.version

    def base_image_pin_field(self) -> str:
        return "clouds.azure.base_image.version"

    def build_site(self, settings: AzureCloud) -> tuple[str, str]:
        return settings.build.location, settings.build.vm_size

    def build_region(self, settings: AzureCloud) -> str:
        return settings.build.location

    def login_user(self, settings: AzureCloud) -> str:
        return LOGIN_USER

    def provider_options(self, settings: AzureCloud) -> AzureOptions:
        capacity = settings.validation_capacity
        return AzureOptions(
            login_user=self.login_user(settings),
            subscription_id=settings.build.subscription_id,
            location=settings.build.location,
            resource_group=settings.build.resource_group,
            gallery_resource_group=settings.gallery.resource_group,
            gallery=settings.gallery.name,
            image_definition=settings.gallery.image_definition,
            regions=list(settings.regions),
            replica_count=settings.gallery.replica_count,
            storage_account_type=settings.gallery.storage_account_type,
            reservation_group=capacity.reservation_group if capacity else None,
            reservation_zone=capacity.zone if capacity else None,
            hyper_v_generation=settings.gallery.hyper_v_generation,
            security_type=settings.gallery.security_type,
        )

    def region_of(self, location: str) -> str:
        """Azure reports ``eastus/1`` (location/zone)."""
        return location.split("/", 1)[0]

    def packer_artifacts(
        self, artifact_id: str, files: list[str], variables: Mapping[str, Any]
    ) -> list[ArtifactRef]:
        """azure-arm writes the managed image id; the gallery image version id (what
        imagectl tracks) is derived from the build's variables."""
        v = variables
        version_id = (
            f"/subscriptions/{v.get('azure_subscription_id', '')}"
            f"/resourceGroups/{v.get('azure_gallery_resource_group', '')}"
            f"/providers/Microsoft.Compute/galleries/{v.get('azure_gallery_name', '')}"
            f"/images/{v.get('azure_gallery_image_definition', '')}"
            f"/versions/{v.get('azure_gallery_image_version', '')}"
        )
        location = str(v.get("azure_location", ""))
        return [ArtifactRef(id=version_id, location=location, name=str(v.get("image_name", "")))]


SPEC = AzureSpec()
