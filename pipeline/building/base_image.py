"""The base image a build starts from, resolved once (``imagectl.clouds.base_image``).

``resolve_base_image`` is what ``imagectl plan`` and ``imagectl build`` ask: the stack's
pin when it has one (no cloud call), else the cloud's newest answer to the stack's query
(``Provider.newest_base_image``); the local cloud's base is its debootstrap disk, named
by the key of everything that goes into it (``imagectl.embedded.base``).
"""

from __future__ import annotations

from imagectl.clouds.base import Provider
from imagectl.clouds.base_image import PINNED, BaseImage
from imagectl.clouds.options import provider_options
from imagectl.clouds.registry import get_provider
from imagectl.clouds.spec import CloudSpec
from imagectl.embedded.base import BaseSpec, ancestry
from imagectl.stacks.resolve import ResolvedStack
from imagectl.stacks.schema import CloudCommon


def local_base_image(resolved: ResolvedStack) -> BaseImage:
    """The local cloud's base: debootstrap of the stack's release from its mirror, with
    its kernel, kept under ``<state>/local/base/<key>``."""
    return ancestry(BaseSpec.from_stack(resolved))


def pinned_base_image(resolved: ResolvedStack, spec: CloudSpec[CloudCommon]) -> BaseImage | None:
    settings = spec.settings(resolved.stack)
    if spec.builds_base_disk:
        return None
    pin = spec.pinned_base_image(settings)
    if pin is None:
        return None
    return BaseImage(cloud=spec.name, id=pin, source=PINNED, query=spec.base_image_query(settings))


def resolve_base_image(
    resolved: ResolvedStack, spec: CloudSpec[CloudCommon], *, provider: Provider | None = None
) -> BaseImage:
    """The base image of ``resolved`` on ``spec``'s cloud: its pin, or the newest match
    (a cloud call; the SDK's errors propagate to the caller)."""
    if spec.builds_base_disk:
        return local_base_image(resolved)
    pinned = pinned_base_image(resolved, spec)
    if pinned is not None:
        return pinned
    cloud = provider or get_provider(spec, provider_options(resolved, spec))
    return cloud.newest_base_image(resolved)


def newest_base_image(
    resolved: ResolvedStack, spec: CloudSpec[CloudCommon], *, provider: Provider | None = None
) -> BaseImage | None:
    """The cloud's newest answer to the stack's query, whatever the stack pins (drift);
    None for the local cloud (its base is keyed by the stack's own inputs)."""
    if spec.builds_base_disk:
        return None
    cloud = provider or get_provider(spec, provider_options(resolved, spec))
    return cloud.newest_base_image(resolved)
