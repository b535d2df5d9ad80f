"""AWS: an EBS-backed AMI built in one region by Packer's amazon-ebs builder, copied to
the target regions at promotion, its "latest" pointer an SSM parameter."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from imagectl.clouds.aws.clients import ENV_ENDPOINT
from imagectl.clouds.aws.stack import SECTION, AwsCloud
from imagectl.clouds.common import endpoint_from_env
from imagectl.clouds.options import ENV_POLL
from imagectl.clouds.spec import ArtifactRef, CloudSpec, ProviderOptions
from imagectl.core.errors import UserError
from imagectl.settings import env_seconds

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

# Who gets the key pair: the AMI's default user, set by its publisher's cloud-init config
# (EC2 User Guide, "Connect to your Linux instance", default user names per AMI):
# Ubuntu (Canonical) ubuntu, Debian admin, Amazon Linux ec2-user. Other owners: set
# clouds.aws.base_image.login_user.
DEFAULT_USERS = {
    "099720109477": "ubuntu",  # Canonical
    "136693071363": "admin",  # Debian
    "137112412989": "ec2-user",  # Amazon Linux
    "amazon": "ec2-user",
}
_ZONE = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$")  # us-east-1a -> us-east-1


def region_of(location: str) -> str:
    """``us-east-1a`` -> ``us-east-1``; a region stays a region."""
    m = _ZONE.match(location)
    return m[1] if m else location


@dataclass(frozen=True, kw_only=True)
class AwsOptions(ProviderOptions):
    """What ``AwsProvider`` is built from: the stack's clouds.aws section
    (``provider_options``), the environment and a caller's overrides. A misspelt
    option is a TypeError here, never silently dropped."""

    region: str | None = None
    regions: list[str] | None = None
    endpoint_url: str | None = None
    session: Any = None
    retry_mode: str = "adaptive"
    max_attempts: int = 8
    poll_interval_s: float = 5.0
    subnet_id: str | None = None
    instance_profile: str | None = None
    ssm_prefix: str = "/imagectl"
    ssm_tier: str = "Standard"
    profile: str | None = None
    pointer_timeout_s: float = 300.0
    terminate_wait_s: float = 900.0
    kms_key_ids: dict[str, str] | None = None
    time_bound_copy_minutes: int | None = None
    capacity_reservation_id: str | None = None
    capacity_block: bool = False

    def polled(self, seconds: float) -> AwsOptions:
        return replace(self, poll_interval_s=seconds)

    def in_regions(self, regions: list[str]) -> AwsOptions:
        return replace(self, regions=regions)


class AwsSpec(CloudSpec[AwsCloud]):
    name = "aws"
    section = SECTION
    packer_builder = "amazon-ebs"
    provider_module = "imagectl.clouds.aws.provider"
    doctor_module = "imagectl.clouds.aws.doctor"
    options_type = AwsOptions
    fabrics = SECTION.fabrics

    def packer_vars(self, r: ResolvedStack, settings: AwsCloud, *, build_id: str) -> dict[str, Any]:
        return {
            "aws_region": settings.build.region,
            "aws_instance_type": settings.build.instance_type,
            "aws_subnet_id": settings.build.subnet_id or "",
            "aws_root_volume_gb": settings.build.root_volume_gb,
            # the build region's image is encrypted with its stack key too (kms_key_ids)
            "aws_kms_key_id": settings.kms_key_ids.get(settings.build.region, ""),
        }

    base_image_packer_var = "aws_source_ami"

    def base_image_query(self, settings: AwsCloud) -> str:
        return f"owner {settings.base_image.owner}, name {settings.base_image.name}"

    def pinned_base_image(self, settings: AwsCloud) -> str | None:
        return settings.base_image.id

    def base_image_pin_field(self) -> str:
        return "clouds.aws.base_image.id"

    def endpoint_packer_vars(self) -> dict[str, str]:
        """With IMAGECTL_AWS_ENDPOINT_URL / AWS_ENDPOINT_URL set (the clients' own
        variables), Packer talks to it too, and polls it at the providers' interval where
        IMAGECTL_CLOUD_POLL_S sets one (whole seconds, at least 1: aws_polling's
        delay_seconds), not every 30 s (an emulator's instance is terminated in a poll
        or two; the 30 s wait made each emulated build 30 s longer)."""
        endpoint = endpoint_from_env(None, *ENV_ENDPOINT)
        if not endpoint:
            return {}
        found = {"aws_endpoint_ec2": endpoint}
        poll = env_seconds(ENV_POLL)
        if poll is not None:
            found["aws_polling_delay_seconds"] = str(max(1, math.ceil(poll)))
        return found

    def build_site(self, settings: AwsCloud) -> tuple[str, str]:
        return settings.build.region, settings.build.instance_type

    def build_region(self, settings: AwsCloud) -> str:
        return settings.build.region

    def provider_options(self, settings: AwsCloud) -> AwsOptions:
        capacity = settings.validation_capacity
        return AwsOptions(
            region=settings.build.region,
            regions=list(settings.regions),
            subnet_id=settings.build.subnet_id,
            ssm_prefix=settings.ssm_parameter_prefix,
            ssm_tier=settings.ssm_parameter_tier,
            kms_key_ids=dict(settings.kms_key_ids),
            time_bound_copy_minutes=settings.time_bound_copy_minutes,
            capacity_reservation_id=capacity.reservation_id if capacity else None,
            capacity_block=capacity.capacity_block if capacity else False,
        )

    def login_user(self, settings: AwsCloud) -> str:
        base = settings.base_image
        user = base.login_user or DEFAULT_USERS.get(base.owner)
        if user is None:
            raise UserError(
                f"the AWS base image owner {base.owner} has no known default user: an "
                "instance launched from it gives the key pair to a user imagectl cannot name",
                hint="Set clouds.aws.base_image.login_user (the AMI's documented default user)",
            )
        return user

    def listing_regions(self, settings: AwsCloud) -> list[str]:
        """Every target region and the build region (a candidate's instances run there)."""
        return sorted({settings.build.region, *settings.regions})

    def region_of(self, location: str) -> str:
        return region_of(location)

    def packer_artifacts(
        self, artifact_id: str, files: list[str], variables: Mapping[str, Any]
    ) -> list[ArtifactRef]:
        """amazon-ebs writes ``us-east-1:ami-0123,...`` (one region for a candidate)."""
        pairs = [p.split(":", 1) for p in artifact_id.split(",") if ":" in p]
        name = str(variables.get("image_name", ""))
        return [ArtifactRef(id=ami, location=region, name=name) for region, ami in pairs]


SPEC = AwsSpec()
