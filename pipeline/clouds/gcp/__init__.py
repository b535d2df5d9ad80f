"""Google Cloud (google-cloud-compute over REST): images, families, instances.

``clients`` is the one client factory (endpoint override, anonymous credentials only
for a local endpoint, retries, explicit operation waits); ``labels`` maps imagectl's tag
keys onto GCP label rules; ``provider`` is the Provider.
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.gcp.provider import GcpProvider


def create_provider(**options: Any) -> GcpProvider:
    return GcpProvider(**options)


__all__ = ["GcpProvider", "create_provider"]
