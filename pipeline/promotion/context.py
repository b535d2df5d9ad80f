"""What the promotion commands need from the workspace: the stack, the cloud, a provider.

``provider_for(resolved, cloud)`` builds the provider with the options
``imagectl.clouds.options.provider_options`` derives from the stack (the same mapping
build, validate-image and reap use); endpoints come from the providers' variables
(``IMAGECTL_AWS_ENDPOINT_URL``, ``IMAGECTL_GCP_ENDPOINT``, ``IMAGECTL_AZURE_ENDPOINT``).
"""

from __future__ import annotations

from imagectl.clouds.base import Provider
from imagectl.clouds.options import provider_options
from imagectl.clouds.registry import cloud_spec, get_provider
from imagectl.core.errors import UserError
from imagectl.paths import Workspace
from imagectl.stacks import load_resolved
from imagectl.stacks.resolve import ResolvedStack
from imagectl.stacks.schema import Stack


def load_stack_for(ws: Workspace, name: str) -> ResolvedStack:
    _loaded, resolved = load_resolved(ws.images, name)
    return resolved


def choose_cloud(stack: Stack, cloud: str | None) -> str:
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


def provider_for(resolved: ResolvedStack, cloud: str) -> Provider:
    """The cloud's provider configured from the stack (``clouds.options``)."""
    try:
        spec = cloud_spec(cloud)
        return get_provider(spec, provider_options(resolved, spec))
    except ModuleNotFoundError as error:
        raise UserError(
            f"the {cloud} provider needs the Python module '{error.name}'",
            hint=f"Install the cloud's extra: pip install 'imagectl[{cloud}]'",
        ) from None
