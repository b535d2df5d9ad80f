"""Provider options from a stack's per-cloud settings: one mapping, used by build,
validate-image, reap and promotion alike.

``IMAGECTL_CLOUD_POLL_S`` shortens every provider's polling interval (tests and the
local emulators set it to 0); endpoints come from the providers' own variables
(``IMAGECTL_AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL``, ``IMAGECTL_GCP_ENDPOINT``,
``IMAGECTL_AZURE_ENDPOINT``).
"""

from __future__ import annotations

from typing import Any

from imagectl.errors import UserError

ENV_POLL = "IMAGECTL_CLOUD_POLL_S"


def provider_options(resolved: Any, cloud: str) -> dict[str, Any]:
    settings = getattr(resolved.stack.clouds, cloud, None)
    if settings is None:
        raise UserError(
            f"stack '{resolved.name}' has no '{cloud}' cloud",
            hint=f"Add clouds.{cloud} to images/stacks/{resolved.name}.yaml",
        )
    opts: dict[str, Any]
    if cloud == "aws":
        opts = {
            "region": settings.build.region,
            "regions": list(settings.regions),
            "subnet_id": settings.build.subnet_id,
            "ssm_prefix": settings.ssm_parameter_prefix,
            "ssm_tier": settings.ssm_parameter_tier,
            "kms_key_ids": dict(settings.kms_key_ids),
            "time_bound_copy_minutes": settings.time_bound_copy_minutes,
            "capacity_reservation_id": getattr(
                settings.validation_capacity, "reservation_id", None
            ),
            "capacity_block": getattr(settings.validation_capacity, "capacity_block", False),
        }
    elif cloud == "gcp":
        opts = {
            "project": settings.build.project,
            "zone": settings.build.zone,
            "family": settings.family,
            "regions": list(settings.regions),
            "reservation": getattr(settings.validation_capacity, "reservation", None),
            "reservation_zone": getattr(settings.validation_capacity, "zone", None),
        }
    elif cloud == "azure":
        opts = {
            "subscription_id": settings.build.subscription_id,
            "location": settings.build.location,
            "resource_group": settings.build.resource_group,
            "gallery_resource_group": settings.gallery.resource_group,
            "gallery": settings.gallery.name,
            "image_definition": settings.gallery.image_definition,
            "regions": list(settings.regions),
            "replica_count": settings.gallery.replica_count,
            "storage_account_type": settings.gallery.storage_account_type,
            "reservation_group": getattr(settings.validation_capacity, "reservation_group", None),
            "reservation_zone": getattr(settings.validation_capacity, "zone", None),
            "hyper_v_generation": settings.gallery.hyper_v_generation,
            "security_type": settings.gallery.security_type,
        }
    else:
        opts = {}
    from imagectl.settings import env_seconds

    value = env_seconds(ENV_POLL)
    if value is not None:
        opts.update(
            poll_interval_s=value,
            polling_interval=value,
            retry_initial_s=max(value, 0.01),
            retry_backoff_factor=value,
        )
    return opts


def build_region(resolved: Any, cloud: str) -> str:
    """Where a candidate lives before promotion (its catalog region)."""
    settings = getattr(resolved.stack.clouds, cloud)
    if cloud == "aws":
        return str(settings.build.region)
    if cloud == "azure":
        return str(settings.build.location)
    if cloud == "gcp":
        return "global"
    return "local"
