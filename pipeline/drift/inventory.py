"""The one adapter between drift and the rest of the controller: clouds and catalog.

- ``provider_for(stack, cloud)``: ``imagectl.clouds.registry.get_provider`` configured from the
  stack's cloud settings (the promotion's ``provider_options``; on AWS every target
  region is listed, not only the build region). SDKs are imported lazily.
- ``fleet_providers(stacks, cloud)``: one provider per distinct configuration, with the
  stacks it serves (one AWS account lists each region once).
- ``guarded(cloud, what, fn)``: a cloud SDK failure becomes a one-paragraph ``UserError``.
- ``promoted_images(stack, cloud)``: promoted (or partially promoted) images from the
  catalog (``imagectl.catalog.repository.list_images``), as ``CloudImage`` records.
- ``catalog_receipts(stack)``: boot/validation receipts stored for those images.
- ``built_base_image(stack, cloud)``: the base image id recorded on the build of the
  stack's promoted image (else of its newest build).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.clouds.base import CloudImage, Provider
from imagectl.clouds.options import provider_options
from imagectl.clouds.registry import cloud_spec, get_provider
from imagectl.clouds.spec import ProviderOptions
from imagectl.core.errors import UserError
from imagectl.stacks.resolve import ResolvedStack
from imagectl.tags import TAG_SOURCE_IMAGE

PROMOTED = (ImageState.PROMOTED, ImageState.PARTIALLY_PROMOTED)


def options_for(resolved: ResolvedStack, cloud: str) -> ProviderOptions:
    """The shared provider options of the stack's cloud (``imagectl.clouds.options``),
    listing the regions the cloud's spec lists instances in (AWS: the build region too)."""
    spec = cloud_spec(cloud)
    options = provider_options(resolved, spec)
    return options.in_regions(spec.listing_regions(spec.settings(resolved.stack)))


def provider_for(resolved: ResolvedStack, cloud: str) -> Provider:
    return guarded(cloud, "connect", get_provider, cloud_spec(cloud), options_for(resolved, cloud))


_PLACEMENT = ("region", "regions", "zone", "subnet_id")


def fleet_providers(stacks: list[ResolvedStack], cloud: str) -> list[tuple[Provider, set[str]]]:
    """One provider per account/project/gallery (placement options merged), with the
    names of the stacks it serves."""
    groups: dict[str, tuple[ProviderOptions, set[str]]] = {}
    for resolved in stacks:
        if getattr(resolved.stack.clouds, cloud, None) is None:
            continue
        options = options_for(resolved, cloud)
        account = {k: v for k, v in vars(options).items() if k not in _PLACEMENT}
        key = repr(sorted(account.items()))
        if key in groups:
            merged, names = groups[key]
            regions = {*(getattr(merged, "regions", None) or []),
                       *(getattr(options, "regions", None) or [])}  # fmt: skip
            groups[key] = (merged.in_regions(sorted(regions)), names)
            names.add(resolved.name)
        else:
            groups[key] = (options, {resolved.name})
    return [
        (guarded(cloud, "connect", get_provider, cloud_spec(cloud), options), names)
        for options, names in groups.values()
    ]


T = TypeVar("T")


def guarded(cloud: str, what: str, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """``fn(*args, **kwargs)``; an SDK or network failure is bad configuration (exit 2)."""
    try:
        return fn(*args, **kwargs)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(
            f"{cloud}: cannot {what}: {type(exc).__name__}: {exc}",
            hint=f"Check the {cloud} credentials and endpoint (OIDC in CI); the checks that "
            "ask no cloud run alone with `imagectl drift --upstream --hosts catalog`",
        ) from exc


def promoted_images(stack: str, cloud: str) -> list[CloudImage]:
    """Promoted source images (the validated image each promotion copied from)."""
    catalog = open_catalog()
    with catalog.transaction() as s:
        rows = [
            r
            for r in repo.list_images(s, stack=stack, cloud=cloud, state=list(PROMOTED))
            if TAG_SOURCE_IMAGE not in (r.tags or {})
        ]
        return [
            CloudImage(
                cloud=r.cloud,
                region=r.region,
                image_id=r.cloud_image_id,
                state=r.state,
                tags={str(k): str(v) for k, v in (r.tags or {}).items()},
                created_at=r.created_at,
            )
            for r in rows
        ]


def built_base_image(stack: str, cloud: str) -> str | None:
    """The base image id the stack's promoted image was built on (its "latest" pointer's
    source, else any promoted source image), else the newest build's that recorded one."""
    catalog = open_catalog()
    with catalog.transaction() as s:
        pointers = repo.list_pointers(s, stack=stack, cloud=cloud)
        images = [p.image for p in pointers] + list(
            reversed(repo.list_images(s, stack=stack, cloud=cloud, state=list(PROMOTED)))
        )
        for img in images:
            source = (img.tags or {}).get(TAG_SOURCE_IMAGE)
            if source is not None:
                img = repo.get_image(s, int(source)) or img
            if img.build is not None and img.build.base_image_id:
                return str(img.build.base_image_id)
        for img in reversed(repo.list_images(s, stack=stack, cloud=cloud)):
            if img.build is not None and img.build.base_image_id:
                return str(img.build.base_image_id)
    return None


def catalog_receipts(stack: str) -> list[tuple[str, dict[str, object]]]:
    """(label, receipt) of every receipt stored for the stack's promoted images."""
    catalog = open_catalog()
    out: list[tuple[str, dict[str, object]]] = []
    with catalog.transaction() as s:
        for img in repo.list_images(s, stack=stack, state=list(PROMOTED)):
            for run in repo.receipts(s, img):
                out.append((f"catalog:{img.cloud}/{img.region}/{run.host}", dict(run.receipt)))
    return out
