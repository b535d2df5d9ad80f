"""Google Cloud: a global image built by Packer's googlecompute builder in one zone, its
"latest" pointer an image family; tags are labels (their own key and value rules)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from imagectl.clouds.gcp.stack import SECTION, GcpCloud
from imagectl.clouds.spec import ArtifactRef, CloudSpec, ProviderOptions
from imagectl.tags import gcp_label_key, gcp_label_value

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")  # us-central1-a -> us-central1
GLOBAL = "global"  # a Compute Engine image is a global resource
# The user a validation instance's key is given to: metadata ssh-keys "USER:KEY", which the
# guest environment creates ("Manage SSH keys in metadata", Compute Engine docs)
LOGIN_USER = "imagectl"


@dataclass(frozen=True, kw_only=True)
class GcpOptions(ProviderOptions):
    """What ``GcpProvider`` is built from: the stack's clouds.gcp section
    (``provider_options``), the environment and a caller's overrides. A misspelt
    option is a TypeError here, never silently dropped."""

    project: str
    zone: str | None = None
    family: str | None = None
    network: str = "global/networks/default"
    subnetwork: str | None = None
    endpoint: str | None = None
    credentials: Any = None
    poll_interval_s: float = 2.0
    retry_initial_s: float = 1.0
    boot_disk_gb: int = 200
    regions: list[str] | None = None
    reservation: str | None = None
    reservation_zone: str | None = None
    login_user: str = LOGIN_USER

    def polled(self, seconds: float) -> GcpOptions:
        return replace(self, poll_interval_s=seconds, retry_initial_s=max(seconds, 0.01))

    def in_regions(self, regions: list[str]) -> GcpOptions:
        return replace(self, regions=regions)


class GcpSpec(CloudSpec[GcpCloud]):
    name = "gcp"
    section = SECTION
    image_scope = "global"
    packer_builder = "googlecompute"
    provider_module = "imagectl.clouds.gcp.provider"
    doctor_module = "imagectl.clouds.gcp.doctor"
    options_type = GcpOptions

    def packer_vars(self, r: ResolvedStack, settings: GcpCloud, *, build_id: str) -> dict[str, Any]:
        return {
            "gcp_project": settings.build.project,
            "gcp_zone": settings.build.zone,
            "gcp_machine_type": settings.build.machine_type,
            "gcp_source_image_project": settings.base_image.project,
        }

    base_image_packer_var = "gcp_source_image"

    def base_image_query(self, settings: GcpCloud) -> str:
        return f"project {settings.base_image.project}, family {settings.base_image.family}"

    def pinned_base_image(self, settings: GcpCloud) -> str | None:
        return settings.base_image.image

    def base_image_pin_field(self) -> str:
        return "clouds.gcp.base_image.image"

    def build_site(self, settings: GcpCloud) -> tuple[str, str]:
        return settings.build.zone, settings.build.machine_type

    def build_region(self, settings: GcpCloud) -> str:
        return GLOBAL

    def login_user(self, settings: GcpCloud) -> str:
        return LOGIN_USER

    def provider_options(self, settings: GcpCloud) -> GcpOptions:
        capacity = settings.validation_capacity
        return GcpOptions(
            login_user=self.login_user(settings),
            project=settings.build.project,
            zone=settings.build.zone,
            family=settings.family,
            regions=list(settings.regions),
            reservation=capacity.reservation if capacity else None,
            reservation_zone=capacity.zone if capacity else None,
        )

    def region_of(self, location: str) -> str:
        m = _ZONE.match(location)
        return m[1] if m else location

    def tag_key(self, key: str) -> str:
        return gcp_label_key(key)

    def tag_value(self, value: object) -> str:
        return gcp_label_value(None if value is None else str(value))

    def packer_artifacts(
        self, artifact_id: str, files: list[str], variables: Mapping[str, Any]
    ) -> list[ArtifactRef]:
        """googlecompute writes the image name; the project comes from the build's
        variables."""
        project = str(variables.get("gcp_project", ""))
        return [ArtifactRef(id=artifact_id, location=project, name=artifact_id)]


SPEC = GcpSpec()
