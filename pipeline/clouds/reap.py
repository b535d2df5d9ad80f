"""The reaper: terminate every imagectl-managed instance whose TTL has passed.

For runners that died without cleaning up (``kill -9``, a lost CI machine). Only
instances tagged ``imagectl:managed=true`` with an ``imagectl:expires-at`` in the past
are touched; anything else is left alone.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from imagectl.clouds.base import Instance, Provider
from imagectl.clouds.common import is_expired, utcnow
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
    orphans = getattr(provider, "reap_orphans", None)  # AWS: security groups left behind
    if orphans is not None:
        for record in orphans(now=now, dry_run=dry_run):
            out.append(Reaped(provider.cloud, record, "would-delete" if dry_run else "deleted"))
    return out
