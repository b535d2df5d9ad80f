"""Azure: a Shared Image Gallery version built by Packer's azure-arm builder in one
location; replication is one region list on that version, so copies go one at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from imagectl.clouds.spec import CloudSpec
from imagectl.stacks.schema import AzureCloud

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack


def gallery_image_version(build_id: str) -> str:
    """Gallery image versions are MAJOR.MINOR.PATCH: ``20261122-042530-ab12`` -> 2026.1122.42530."""
    parts = build_id.split("-")
    if len(parts) >= 2 and len(parts[0]) == 8 and parts[0].isdigit() and parts[1].isdigit():
        return f"{int(parts[0][:4])}.{int(parts[0][4:])}.{int(parts[1])}"
    return "0.0.0"


# The user a validation VM's key is given to: osProfile.adminUsername with the key in
# linuxConfiguration.ssh.publicKeys (Virtual Machines - Create Or Update, ARM REST)
LOGIN_USER = "imagectl"


class AzureSpec(CloudSpec[AzureCloud]):
    name = "azure"
    packer_builder = "azure-arm"
    provider_module = "imagectl.clouds.azure.provider"
    replicate_serially = True
    fabrics = frozenset({"azure_infiniband"})
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
        }

    def build_site(self, settings: AzureCloud) -> tuple[str, str]:
        return settings.build.location, settings.build.vm_size

    def build_region(self, settings: AzureCloud) -> str:
        return settings.build.location

    def login_user(self, settings: AzureCloud) -> str:
        return LOGIN_USER

    def provider_options(self, settings: AzureCloud) -> dict[str, Any]:
        capacity = settings.validation_capacity
        return {
            "login_user": self.login_user(settings),
            "subscription_id": settings.build.subscription_id,
            "location": settings.build.location,
            "resource_group": settings.build.resource_group,
            "gallery_resource_group": settings.gallery.resource_group,
            "gallery": settings.gallery.name,
            "image_definition": settings.gallery.image_definition,
            "regions": list(settings.regions),
            "replica_count": settings.gallery.replica_count,
            "storage_account_type": settings.gallery.storage_account_type,
            "reservation_group": capacity.reservation_group if capacity else None,
            "reservation_zone": capacity.zone if capacity else None,
            "hyper_v_generation": settings.gallery.hyper_v_generation,
            "security_type": settings.gallery.security_type,
        }

    def region_of(self, location: str) -> str:
        """Azure reports ``eastus/1`` (location/zone)."""
        return location.split("/", 1)[0]


SPEC = AzureSpec()
