"""imagectl tag keys <-> GCP labels (lowercase, digits, '-', '_'; at most 63 characters).

``imagectl:expires-at`` is stored as ``imagectl-expires-at=20261122t051000z`` and read
back as ISO-8601, so ``Instance.expires_at()`` works the same on every cloud.
"""

from __future__ import annotations

from imagectl.clouds.common import decode_time, encode_time, iso, parse_time
from imagectl.tags import PREFIX, TAG_TTL, gcp_label_key, gcp_label_value


def to_labels(tags: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in tags.items():
        if key == TAG_TTL:
            when = parse_time(value)
            out[gcp_label_key(key)] = encode_time(when) if when else gcp_label_value(value)
        else:
            out[gcp_label_key(key)] = gcp_label_value(value)
    return out


def from_labels(labels: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (labels or {}).items():
        if key.startswith(PREFIX + "-"):
            canonical = PREFIX + ":" + key[len(PREFIX) + 1 :]
            if canonical == TAG_TTL:
                when = decode_time(value)
                value = iso(when) if when else value
            out[canonical] = value
        else:
            out[key] = value
    return out


def label_filter(tags: dict[str, str]) -> str:
    """A Compute list filter on labels: ``(labels.imagectl-stack = "x") AND (...)``."""
    return " AND ".join(f'(labels.{k} = "{v}")' for k, v in to_labels(tags).items())
