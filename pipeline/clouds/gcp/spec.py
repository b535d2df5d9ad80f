"""Google Cloud: a global image built by Packer's googlecompute builder in one zone, its
"latest" pointer an image family; tags are labels (their own key and value rules)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from imagectl.clouds.spec import CloudSpec
from imagectl.stacks.schema import GcpCloud
from imagectl.tags import gcp_label_key, gcp_label_value

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")  # us-central1-a -> us-central1
GLOBAL = "global"  # a Compute Engine image is a global resource
# The user a validation instance's key is given to: metadata ssh-keys "USER:KEY", which the
# guest environment creates ("Manage SSH keys in metadata", Compute Engine docs)
LOGIN_USER = "imagectl"


class GcpSpec(CloudSpec[GcpCloud]):
    name = "gcp"
    packer_builder = "googlecompute"
    provider_module = "imagectl.clouds.gcp.provider"

    def packer_vars(self, r: ResolvedStack, settings: GcpCloud, *, build_id: str) -> dict[str, Any]:
        return {
            "gcp_project": settings.build.project,
            "gcp_zone": settings.build.zone,
            "gcp_machine_type": settings.build.machine_type,
            "gcp_source_image_project": settings.base_image.project,
            "gcp_source_image_family": settings.base_image.family,
        }

    def build_site(self, settings: GcpCloud) -> tuple[str, str]:
        return settings.build.zone, settings.build.machine_type

    def build_region(self, settings: GcpCloud) -> str:
        return GLOBAL

    def login_user(self, settings: GcpCloud) -> str:
        return LOGIN_USER

    def provider_options(self, settings: GcpCloud) -> dict[str, Any]:
        capacity = settings.validation_capacity
        return {
            "login_user": self.login_user(settings),
            "project": settings.build.project,
            "zone": settings.build.zone,
            "family": settings.family,
            "regions": list(settings.regions),
            "reservation": capacity.reservation if capacity else None,
            "reservation_zone": capacity.zone if capacity else None,
        }

    def region_of(self, location: str) -> str:
        m = _ZONE.match(location)
        return m[1] if m else location

    def tag_key(self, key: str) -> str:
        return gcp_label_key(key)

    def tag_value(self, value: object) -> str:
        return gcp_label_value(None if value is None else str(value))


SPEC = GcpSpec()
