"""The reaper: terminate every imagectl-managed instance whose TTL has passed, and delete
the multi-node placements such runs left.

For runners that died without cleaning up (``kill -9``, a lost CI machine). Only
instances tagged ``imagectl:managed=true`` with an ``imagectl:expires-at`` in the past
are touched; anything else is left alone. A placement (``imagectl.clouds.placement``)
is deleted only when it carries imagectl's marking, its TTL passed and it holds no
instance: every cloud refuses to delete one in use (AWS ``DeletePlacementGroup``:
``InvalidPlacementGroup.InUse`` until its instances are terminated; Google Cloud
``resourcePolicies.delete``: 400 while a VM uses the policy; Azure: a proximity placement
group a VM references), so one still holding an instance, expired or not, is left for a
later sweep, after its instances are gone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.clouds.base import Instance, Provider
from imagectl.clouds.common import is_expired, utcnow
from imagectl.clouds.options import provider_options
from imagectl.clouds.placement import ManagedPlacement
from imagectl.clouds.registry import cloud_spec, get_provider
from imagectl.stacks import load_resolved
from imagectl.tags import TAG_LAUNCHED_BY, TAG_STACK


def _swept(
    tags: Mapping[str, str], expires: dt.datetime | None, action: str, error: str
) -> dict[str, object]:
    """The JSON fields every swept thing reports after its own: the stack and launcher its
    tags name, when it expired, what was done and the error, if any."""
    return {
        "stack": tags.get(TAG_STACK),
        "launched_by": tags.get(TAG_LAUNCHED_BY),
        "expires_at": expires.isoformat() if expires else None,
        "action": action,
        "error": error,
    }


@dataclass(frozen=True)
class Reaped:
    cloud: str
    instance: Instance
    action: str  # terminated | would-terminate | failed | deleted | would-delete
    error: str = ""

    def to_dict(self) -> dict[str, object]:
        inst = self.instance
        return {
            "cloud": self.cloud,
            "instance_id": inst.instance_id,
            "location": inst.region,
            **_swept(inst.tags, inst.expires_at(), self.action, self.error),
        }


def reap(
    provider: Provider, *, dry_run: bool = False, now: dt.datetime | None = None
) -> list[Reaped]:
    now = now or utcnow()
    out = []
    for inst in provider.list_instances(managed_only=True):
        if not is_expired(inst, now):
            continue
        if dry_run:
            out.append(Reaped(provider.cloud, inst, "would-terminate"))
            continue
        try:
            provider.terminate(inst)
        except Exception as exc:
            out.append(Reaped(provider.cloud, inst, "failed", f"{type(exc).__name__}: {exc}"))
            continue
        out.append(Reaped(provider.cloud, inst, "terminated"))
    for record in provider.reap_orphans(now=now, dry_run=dry_run):
        out.append(Reaped(provider.cloud, record, "would-delete" if dry_run else "deleted"))
    return out


@dataclass(frozen=True)
class ReapedPlacement:
    cloud: str
    placement: ManagedPlacement
    action: str  # deleted | would-delete | failed
    error: str = ""

    def to_dict(self) -> dict[str, object]:
        placement = self.placement.placement
        return {
            "cloud": self.cloud,
            "placement": placement.name,
            "kind": placement.kind,
            "location": placement.location,
            **_swept(self.placement.tags, self.placement.expires_at(), self.action, self.error),
        }


def reap_placements(
    provider: Provider, *, dry_run: bool = False, now: dt.datetime | None = None
) -> list[ReapedPlacement]:
    """imagectl's placements whose TTL passed and that hold no instance: deleted, or
    listed with ``dry_run``. A deletion that fails is reported and the others go on."""
    now = now or utcnow()
    out = []
    for managed in provider.list_placements():
        expires = managed.expires_at()
        if expires is None or expires > now or managed.members:
            continue
        if dry_run:
            out.append(ReapedPlacement(provider.cloud, managed, "would-delete"))
            continue
        try:
            provider.delete_placement(managed.placement)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            out.append(ReapedPlacement(provider.cloud, managed, "failed", error))
            continue
        out.append(ReapedPlacement(provider.cloud, managed, "deleted"))
    return out


@dataclass(frozen=True)
class Sweep:
    """``imagectl reap``'s result: every instance and placement once, and each account
    that failed."""

    instances: list[dict[str, object]]
    errors: list[str]
    placements: list[dict[str, object]] = field(default_factory=list)
    # each account/project/gallery is two checks: its instances, then its placements;
    # ``not_run`` names those that could not be listed
    checks: int = 0
    not_run: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(
            r["action"] == "failed" for r in [*self.instances, *self.placements]
        )


def sweep(
    images: Path, stacks: list[str], clouds: tuple[str, ...], *, dry_run: bool = False
) -> Sweep:
    """Reap every account/project/gallery the stacks name (each once, however many stacks
    share it); a cloud that cannot be listed is an error of the sweep, not its end."""
    seen: set[tuple[str, str]] = set()
    results: list[dict[str, object]] = []
    placements: list[dict[str, object]] = []
    errors: list[str] = []
    not_run: list[str] = []
    for name in stacks:
        _, resolved = load_resolved(images, name)
        enabled = resolved.stack.clouds.enabled()
        for cloud in clouds:
            if cloud not in enabled:
                continue
            spec = cloud_spec(cloud)
            options = provider_options(resolved, spec)
            key = (cloud, repr(options))
            if key in seen:
                continue
            seen.add(key)
            try:
                provider = get_provider(spec, options)
                results.extend(r.to_dict() for r in reap(provider, dry_run=dry_run))
            except Exception as exc:  # neither its instances nor its placements were listed
                errors.append(f"{cloud} ({name}): {type(exc).__name__}: {exc}")
                not_run += [f"{cloud} ({name}) instances", f"{cloud} ({name}) placements"]
                continue
            # after the instances: a placement whose hosts were just terminated may be free
            try:
                reaped = reap_placements(provider, dry_run=dry_run)
                placements.extend(r.to_dict() for r in reaped)
            except Exception as exc:  # the instances' results stand
                errors.append(f"{cloud} ({name}) placements: {type(exc).__name__}: {exc}")
                not_run.append(f"{cloud} ({name}) placements")
    # The same instance can be listed through two stacks sharing an account: report once.
    unique = list({(r["cloud"], r["instance_id"]): r for r in results}.values())
    places = {(r["cloud"], r["location"], r["placement"]): r for r in placements}
    return Sweep(
        instances=unique,
        errors=errors,
        placements=list(places.values()),
        checks=2 * len(seen),
        not_run=not_run,
    )
