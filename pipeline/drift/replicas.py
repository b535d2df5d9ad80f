"""Replica drift: promoted images missing, failed or pointed at inconsistently.

For every promoted image of a stack (from the catalog) and every target region of its
cloud (the stack file), ask the cloud (``Provider.replica_status``): a region that lacks
the image is ``replica-missing``, one where its copy failed is ``replica-failed``. The
"latest" pointer of each target region (``Provider.get_pointer``) must name the copy of
the same promoted image everywhere; a region naming another image (or none) is
``pointer-disagrees``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from imagectl.drift import inventory
from imagectl.drift.errors import recorded
from imagectl.drift.findings import DriftReport, Finding, StackDrift
from imagectl.stacks.resolve import ResolvedStack


def check(stacks: list[ResolvedStack], report: DriftReport) -> None:
    """Every stack and cloud; a cloud that cannot be read (no credentials, unreachable) is
    an error of that stack and cloud, and the others are still checked."""
    for resolved in stacks:
        drift = report.stack(resolved.name)
        for cloud, settings in resolved.stack.clouds.enabled().items():
            with recorded(report, "replicas", [resolved.name], cloud):
                _check_cloud(resolved, cloud, settings, drift)


def _check_cloud(resolved: ResolvedStack, cloud: str, settings: Any, drift: StackDrift) -> None:
    images = inventory.promoted_images(resolved.name, cloud)
    if not images:
        return
    provider = inventory.provider_for(resolved, cloud)
    # region -> cloud id of each promoted image's copy there
    copies: dict[str, dict[str, str]] = {r: {} for r in settings.regions}
    for image in images:
        for region in settings.regions:
            status = inventory.guarded(
                cloud, "read replica status", provider.replica_status, image, region
            )
            if status.image_id:
                copies[region][status.image_id] = image.image_id
            if status.state in ("missing", "failed"):
                drift.findings.append(Finding(
                    "replicas", resolved.name, f"replica-{status.state}", image.image_id,
                    "available", status.state,
                    status.detail or f"promoted image has no usable copy in {region}",
                    cloud=cloud, region=region,
                ))  # fmt: skip
    named: dict[str, str | None] = {}
    for region in settings.regions:
        pointer = inventory.guarded(
            cloud, "read the latest pointer", provider.get_pointer, resolved.name, region
        )
        named[region] = copies[region].get(pointer, pointer) if pointer else None
    votes = Counter(v for v in named.values() if v)
    if not votes:
        return
    majority = votes.most_common(1)[0][0]
    for region, source in named.items():
        if source != majority:
            drift.findings.append(Finding(
                "replicas", resolved.name, "pointer-disagrees", f"latest of {cloud}",
                majority, source or "(no pointer)",
                f"{region}'s latest pointer names {source or 'nothing'}, the other "
                f"regions {majority}",
                cloud=cloud, region=region,
            ))  # fmt: skip
