"""The reaper: terminate every imagectl-managed instance whose TTL has passed.

For runners that died without cleaning up (``kill -9``, a lost CI machine). Only
instances tagged ``imagectl:managed=true`` with an ``imagectl:expires-at`` in the past
are touched; anything else is left alone.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.clouds.base import Instance, Provider
from imagectl.clouds.common import is_expired, utcnow
from imagectl.clouds.options import provider_options
from imagectl.clouds.registry import cloud_spec, get_provider
from imagectl.stacks import load_resolved
from imagectl.tags import TAG_LAUNCHED_BY, TAG_STACK


@dataclass(frozen=True)
class Reaped:
    cloud: str
    instance: Instance
    action: str  # terminated | would-terminate | failed | deleted | would-delete
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        exp = self.instance.expires_at()
        return {
            "cloud": self.cloud,
            "instance_id": self.instance.instance_id,
            "location": self.instance.region,
            "stack": self.instance.tags.get(TAG_STACK),
            "launched_by": self.instance.tags.get(TAG_LAUNCHED_BY),
            "expires_at": exp.isoformat() if exp else None,
            "action": self.action,
            "error": self.error,
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
class Sweep:
    """``imagectl reap``'s result: every instance once, and each account that failed."""

    instances: list[dict[str, Any]]
    errors: list[str]

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(r["action"] == "failed" for r in self.instances)


def sweep(
    images: Path, stacks: list[str], clouds: tuple[str, ...], *, dry_run: bool = False
) -> Sweep:
    """Reap every account/project/gallery the stacks name (each once, however many stacks
    share it); a cloud that cannot be listed is an error of the sweep, not its end."""
    seen: set[tuple[str, str]] = set()
    results: list[dict[str, Any]] = []
    errors: list[str] = []
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
            except Exception as exc:
                errors.append(f"{cloud} ({name}): {type(exc).__name__}: {exc}")
    # The same instance can be listed through two stacks sharing an account: report once.
    unique = list({(r["cloud"], r["instance_id"]): r for r in results}.values())
    return Sweep(instances=unique, errors=errors)
