"""Numeric settings from ``IMAGECTL_*`` environment variables, checked once.

A value that is not a number is bad configuration: exit 2 with the variable named and
what it expects, never a ``ValueError`` traceback from deep inside a cloud call.
"""

from __future__ import annotations

import math
import os

from imagectl.core.errors import UserError


def parse_seconds(name: str, raw: str, *, minimum: float = 0.0) -> float:
    """``raw`` (the value of ``name``) as a finite number of seconds >= ``minimum``."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < minimum:
        raise UserError(
            f"${name}={raw[:40]!r} is not a number of seconds (>= {minimum:g})",
            hint=f"Set {name} to a number such as 0.5, or unset it",
        )
    return value


def env_seconds(name: str, *, minimum: float = 0.0) -> float | None:
    """The environment variable ``name`` as seconds, or None when it is unset or empty."""
    raw = os.environ.get(name, "").strip()
    return parse_seconds(name, raw, minimum=minimum) if raw else None
