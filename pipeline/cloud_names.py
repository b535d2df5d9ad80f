"""The names of the clouds imagectl builds for: the one list the stack schema, the CLI's
choices and the cloud specs (``imagectl.clouds.registry``, which checks it) share.
Imports nothing, so the CLI's option parsing stays fast."""

from __future__ import annotations

from typing import Literal

CLOUDS = ("aws", "gcp", "azure", "local")
Cloud = Literal["aws", "gcp", "azure", "local"]
# the real clouds (reaped, tagged); "local" is QEMU images on this machine
REMOTE_CLOUDS = ("aws", "gcp", "azure")
