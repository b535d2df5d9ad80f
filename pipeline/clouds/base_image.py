"""A candidate's ancestry: the base image it was built on, by the id its cloud gives it.

A stack names its base by a query (an AMI owner and name filter, a GCP image family, an
Azure marketplace publisher/offer/SKU), whose answer changes whenever the publisher
releases a new image. ``imagectl plan`` and ``imagectl build`` resolve the query once to
an id (``Provider.newest_base_image``) unless the stack pins one
(``CloudSpec.pinned_base_image``: ``clouds.aws.base_image.id``,
``clouds.gcp.base_image.image``, ``clouds.azure.base_image.version``); the build gives
Packer that id, never the query, and records it on the build, in the image manifest,
the SBOM and the attestation. ``imagectl drift`` asks the query again and reports a newer
answer with the pin that would take it.

The id is what the cloud calls the image: an AMI id (``ami-...``), a Compute Engine
image name (``ubuntu-2204-jammy-v20250112``), an Azure marketplace image version
(``22.04.202501150``); the local cloud's is its base disk's key.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

PINNED = "pinned"  # the stack names the id
RESOLVED = "resolved"  # the cloud answered the stack's query


@dataclass(frozen=True)
class BaseImage:
    cloud: str
    id: str  # AMI id, GCP image name, Azure image version, local base key
    name: str = ""  # what its publisher named it (AMI name, URN), or ""
    created_at: dt.datetime | None = None
    source: str = RESOLVED  # pinned | resolved
    query: str = ""  # the stack's query, as the cloud was asked it

    def to_dict(self) -> dict[str, object]:
        return {
            "cloud": self.cloud,
            "id": self.id,
            "name": self.name,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "source": self.source,
            "query": self.query,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, object]) -> BaseImage:
        created = doc.get("created_at")
        return cls(
            cloud=str(doc["cloud"]),
            id=str(doc["id"]),
            name=str(doc.get("name") or ""),
            created_at=dt.datetime.fromisoformat(str(created)) if created else None,
            source=str(doc.get("source") or RESOLVED),
            query=str(doc.get("query") or ""),
        )

    @property
    def label(self) -> str:
        return f"{self.id} ({self.name})" if self.name and self.name != self.id else self.id
