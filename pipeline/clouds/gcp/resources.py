"""Compute resources as imagectl names and reads them: valid names, an image's state."""

from __future__ import annotations

import re
from typing import Any

_NAME_BAD = re.compile(r"[^a-z0-9-]")


def resource_name(*parts: str) -> str:
    """A valid Compute resource name: [a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters."""
    raw = _NAME_BAD.sub("-", "-".join(parts).lower())
    raw = re.sub("-+", "-", raw)[:63].strip("-")
    return raw if raw[:1].isalpha() else ("i" + raw)[:63]


def image_state(raw: Any) -> str:
    """imagectl's state of a Compute image: deprecated, available, pending, failed..."""
    deprecated = raw.deprecated.state if raw.deprecated else ""
    if deprecated and deprecated != "ACTIVE":
        return "deprecated"
    return {"READY": "available", "PENDING": "pending", "FAILED": "failed"}.get(
        raw.status, raw.status.lower()
    )
