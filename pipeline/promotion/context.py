"""What the promotion commands need from the workspace: the stack, the cloud, a provider.

``provider_for(stack, cloud)`` is the one adapter between a stack's cloud settings and
``imagectl.clouds.get_provider``: it offers each cloud module's ``create_provider`` the
settings it may want (AWS: build region and SSM parameter prefix; Google Cloud: project
and family; Azure: subscription, gallery) and passes only the keyword arguments that
function accepts, so a provider that needs fewer options still works.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from imagectl.errors import UserError


def load_stack_for(ws: Any, name: str) -> Any:
    from imagectl.stacks import load_resolved

    _loaded, resolved = load_resolved(ws.images, name)
    return resolved


def choose_cloud(stack: Any, cloud: str | None) -> str:
    enabled = list(stack.clouds.enabled())
    if cloud:
        if cloud not in enabled:
            raise UserError(
                f"stack {stack.name} has no '{cloud}' cloud",
                hint=f"Use --cloud with one of: {', '.join(enabled)}",
            )
        return cloud
    if len(enabled) == 1:
        return enabled[0]
    raise UserError(
        f"stack {stack.name} targets several clouds ({', '.join(enabled)})",
        hint="Pass --cloud to choose one",
    )


def provider_options(stack: Any, cloud: str) -> dict[str, Any]:
    settings = getattr(stack.clouds, cloud)
    if cloud == "aws":
        return {
            "region": settings.build.region,
            "ssm_prefix": settings.ssm_parameter_prefix,
            "ssm_parameter_prefix": settings.ssm_parameter_prefix,
        }
    if cloud == "gcp":
        return {"project": settings.build.project, "family": settings.family}
    if cloud == "azure":
        g = settings.gallery
        return {
            "subscription_id": settings.build.subscription_id,
            "resource_group": g.resource_group,
            "gallery": g.name,
            "image_definition": g.image_definition,
            "location": settings.build.location,
        }
    return {}


def provider_for(stack: Any, cloud: str) -> Any:
    from imagectl.clouds import _MODULES, get_provider

    options = provider_options(stack, cloud)
    try:
        factory = importlib.import_module(_MODULES[cloud]).create_provider
    except ModuleNotFoundError as error:
        raise UserError(
            f"the {cloud} provider is not available ({error})",
            hint="Install the cloud's extra: pip install 'imagectl[" + cloud + "]'",
        ) from None
    params = inspect.signature(factory).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        options = {k: v for k, v in options.items() if k in params}
    return get_provider(cloud, **options)
