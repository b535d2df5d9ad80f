"""Base image drift: the publisher released a newer base image than the one the stack
builds on (``imagectl.clouds.base_image``).

For every stack and cloud (the local cloud builds its own base): the cloud's newest
answer to the stack's base image query (``Provider.newest_base_image``: the AMI owner and
name filter, the GCP family, the Azure marketplace SKU) against what the stack builds on:
its pin, else the base recorded on the build of its promoted image (or of its newest
build). A newer one is ``base-image-newer`` with the pin that would take it
(``clouds.<cloud>.base_image.<field>: <id>``); a stack that pins nothing and has no build
yet gets ``base-image-unrecorded`` (info: the next build resolves it).
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.registry import cloud_spec
from imagectl.drift import inventory
from imagectl.drift.errors import recorded
from imagectl.drift.findings import DriftReport, Finding, StackDrift
from imagectl.stacks.resolve import ResolvedStack

SOURCE = "base-images"


def check(stacks: list[ResolvedStack], report: DriftReport) -> None:
    """Every stack and cloud; a cloud that cannot be asked is an error of that stack and
    cloud, and the others are still checked."""
    for resolved in stacks:
        drift = report.stack(resolved.name)
        for cloud, settings in resolved.stack.clouds.enabled().items():
            if cloud_spec(cloud).builds_base_disk:
                continue
            with recorded(report, SOURCE, [resolved.name], cloud):
                _check_cloud(resolved, cloud, settings, drift)


def _check_cloud(resolved: ResolvedStack, cloud: str, settings: Any, drift: StackDrift) -> None:
    spec = cloud_spec(cloud)
    provider = inventory.provider_for(resolved, cloud)
    newest = inventory.guarded(
        cloud, "resolve the base image", provider.newest_base_image, resolved
    )
    pin = spec.pinned_base_image(settings)
    current = pin or inventory.built_base_image(resolved.name, cloud)
    field = spec.base_image_pin_field()
    proposed = {"pin": field, "proposed": newest.id}
    created = newest.created_at.isoformat() if newest.created_at else None
    extra: dict[str, object] = {
        "proposed_pin": proposed, "name": newest.name, "created_at": created,
        "query": newest.query, "pinned": pin is not None,
    }  # fmt: skip
    subject = f"base image ({spec.base_image_query(settings)})"
    if current is None:
        drift.findings.append(Finding(
            SOURCE, resolved.name, "base-image-unrecorded", subject, None, newest.id,
            f"no build of {resolved.name} on {cloud} recorded its base yet; the next build "
            f"uses {newest.label}. Pin it with {field}: {newest.id}",
            severity="info", cloud=cloud, extra=extra,
        ))  # fmt: skip
    elif current != newest.id:
        how = "the stack pins" if pin else "the promoted image was built on"
        drift.findings.append(Finding(
            SOURCE, resolved.name, "base-image-newer", subject, current, newest.id,
            f"a newer base image is published: {newest.label}; {how} {current}. Proposed "
            f"pin: {field}: {newest.id} (build, validate and promote to take it)",
            cloud=cloud, extra=extra,
        ))  # fmt: skip
