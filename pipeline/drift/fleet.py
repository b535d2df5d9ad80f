"""Fleet drift: running instances per cloud and region, grouped by image.

Every cloud any selected stack uses is listed once (``Provider.list_instances``).
Instances carry the stack tag (``imagectl:stack``); an instance of a stack whose image is
not the stack's current image in its region (the "latest" pointer) counts as stale.
``fleet-summary`` (info) gives the grouping per stack, cloud and region; ``fleet-stale``
how many run something else, and on which images.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from imagectl.clouds.base import Instance, Provider
from imagectl.clouds.registry import cloud_spec
from imagectl.drift import inventory
from imagectl.drift.errors import recorded
from imagectl.drift.findings import DriftReport, Finding
from imagectl.stacks.resolve import ResolvedStack
from imagectl.tags import TAG_STACK

# States of instances that no longer run anything (EC2, Compute Engine, Azure power and
# provisioning states, compared lower-case); everything else counts as running.
GONE = frozenset({"terminated", "stopped", "stopping", "shutting-down", "suspended",
                  "suspending", "deallocated", "deallocating", "deleting", "deleted"})  # fmt: skip


def region_of(cloud: str, location: str) -> str:
    """Instances report a zone (us-east-1a, us-central1-a, eastus/1); pointers live per
    region (``CloudSpec.region_of``)."""
    return cloud_spec(cloud).region_of(location)


@dataclass
class Group:
    stack: str
    cloud: str
    region: str
    current: str | None
    images: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.images.values())

    @property
    def stale(self) -> dict[str, int]:
        return {i: n for i, n in self.images.items() if i != self.current}


def group(
    instances: Iterable[Instance],
    current: Callable[[str, str], str | None],
    stacks: set[str],
) -> dict[tuple[str, str, str], Group]:
    """Group running instances of the given stacks by (stack, cloud, region).

    ``current(stack, region)`` is asked once per stack and region (the pointer); a zone
    (us-east-1a) counts for its region.
    """
    out: dict[tuple[str, str, str], Group] = {}
    for inst in instances:
        stack = inst.tags.get(TAG_STACK)
        if stack is None or stack not in stacks or inst.state.lower() in GONE:
            continue
        region = region_of(inst.cloud, inst.region)
        key = (stack, inst.cloud, region)
        entry = out.get(key)
        if entry is None:
            entry = out[key] = Group(stack, inst.cloud, region, current(stack, region))
        entry.images[inst.image_id] += 1
    return out


def check(
    stacks: list[ResolvedStack],
    report: DriftReport,
    providers: dict[str, Provider] | None = None,
) -> None:
    """``providers`` (cloud -> provider) replaces the configured ones (the benchmark)."""
    clouds = sorted({c for s in stacks for c in s.stack.clouds.enabled()})
    for cloud in clouds:
        on_cloud = [s.name for s in stacks if cloud in s.stack.clouds.enabled()]
        # a cloud (or one account of it) that cannot be listed is an error of the stacks
        # it serves (imagectl.drift.errors); the other clouds are still listed
        with recorded(report, "fleet", on_cloud, cloud):
            if providers and cloud in providers:
                serving = [(providers[cloud], {s.name for s in stacks})]
            else:
                serving = inventory.fleet_providers(stacks, cloud)
            seen: set[str] = set()
            for provider, names in serving:
                with recorded(report, "fleet", sorted(names), cloud):
                    _list(report, cloud, provider, names, seen)


def _list(
    report: DriftReport, cloud: str, provider: Provider, names: set[str], seen: set[str]
) -> None:
    listed = inventory.guarded(cloud, "list instances", provider.list_instances, managed_only=False)
    fresh = [i for i in listed if i.instance_id not in seen]
    seen.update(i.instance_id for i in fresh)
    pointer = functools.partial(
        inventory.guarded, cloud, "read the latest pointer", provider.get_pointer
    )
    groups = group(fresh, pointer, names)
    for key in sorted(groups):
        add_findings(report, groups[key])


def add_findings(report: DriftReport, g: Group) -> None:
    drift = report.stack(g.stack)
    summary = ", ".join(f"{img} x{n}" for img, n in g.images.most_common())
    drift.findings.append(Finding(
        "fleet", g.stack, "fleet-summary", f"{g.total} instances", g.current, None, summary,
        severity="info", cloud=g.cloud, region=g.region,
        extra={"images": dict(g.images), "total": g.total},
    ))  # fmt: skip
    stale = g.stale
    if stale:
        n = sum(stale.values())
        drift.findings.append(Finding(
            "fleet", g.stack, "fleet-stale", f"{n} of {g.total} instances",
            g.current, ", ".join(sorted(stale)),
            f"{n} running instances are not on the stack's current image "
            f"({g.current or 'no pointer'}): "
            + ", ".join(f"{i} x{c}" for i, c in sorted(stale.items())),
            cloud=g.cloud, region=g.region, extra={"stale": n, "images": stale},
        ))  # fmt: skip
