"""Helpers every provider shares: the tags of a managed instance, TTLs, endpoints.

Nothing here imports a cloud SDK.
"""

from __future__ import annotations

import datetime as dt
import os

from imagectl.clouds.base import Instance, LaunchRequest
from imagectl.core.errors import CloudError, UserError
from imagectl.tags import TAG_IMAGE, TAG_LAUNCHED_BY, TAG_MANAGED, TAG_STACK, TAG_TTL


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(ts: dt.datetime) -> str:
    """ISO-8601 UTC, seconds precision: ``2026-11-22T05:10:00+00:00``."""
    return ts.astimezone(dt.timezone.utc).replace(microsecond=0).isoformat()


def parse_time(raw: str | None) -> dt.datetime | None:
    if not raw:
        return None
    value = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def instance_tags(
    *,
    stack: str,
    image_id: str,
    ttl: dt.timedelta,
    launched_by: str,
    now: dt.datetime | None = None,
) -> dict[str, str]:
    """Tags on every instance imagectl launches; the reaper keys on managed + expires-at."""
    expires = (now or utcnow()) + ttl
    return {
        TAG_MANAGED: "true",
        TAG_STACK: stack,
        TAG_IMAGE: image_id,
        TAG_TTL: iso(expires),
        TAG_LAUNCHED_BY: launched_by,
    }


def launch_failure(exc: BaseException, translated: BaseException, refused: str) -> BaseException:
    """What a refused launch raises: the cloud's own reading of ``exc`` (``translated``: no
    capacity, a quota), or else a CloudError saying what was ``refused``."""
    return CloudError(refused) if translated is exc else translated


def launch_tags(request: LaunchRequest) -> dict[str, str]:
    """``instance_tags`` of the host a ``Provider.launch`` request starts."""
    return instance_tags(
        stack=request.stack,
        image_id=request.image.image_id,
        ttl=request.ttl,
        launched_by=request.launched_by,
    )


def is_expired(instance: Instance, now: dt.datetime | None = None) -> bool:
    """A managed instance whose TTL passed (an instance without a TTL never expires)."""
    expires = instance.expires_at()
    if expires is None:
        return False
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=dt.timezone.utc)
    return expires <= (now or utcnow())


def encode_time(ts: dt.datetime) -> str:
    return ts.astimezone(dt.timezone.utc).strftime("%Y%m%dt%H%M%Sz")


def decode_time(raw: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(raw.upper(), "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return parse_time(raw)


OPEN_WORLD = ("0.0.0.0/0", "::/0")


def check_cidr(allowed_cidr: str | None) -> None:
    """SSH is admitted from the runner's address only: never from the whole internet."""
    if allowed_cidr in OPEN_WORLD:
        raise UserError(
            f"refusing to open SSH to the whole internet ({allowed_cidr})",
            hint="Pass the runner's own address, e.g. 203.0.113.7/32, or none to use the "
            "cloud's own remote-command channel",
        )


def endpoint_from_env(option: str | None, *names: str) -> str | None:
    """The first of an explicit option and the named environment variables that is set."""
    if option:
        return option
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


class NotReachable(Exception):
    """The instance never became reachable in time: the run is inconclusive."""

    def __init__(self, instance_id: str, detail: str):
        self.instance_id = instance_id
        self.detail = detail
        super().__init__(f"instance {instance_id} is not reachable: {detail}")
