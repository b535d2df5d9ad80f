"""The promotion half of ``Provider``, forwarded to a cloud's promotion object.

AWS, Google Cloud and Azure keep their replication, sharing, pointer and deprecation
calls in ``<cloud>/promotion.py``; their provider sets ``self.promotion`` and inherits
these forwards instead of repeating them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from imagectl.clouds.base import CloudImage, Provider, ReplicaStatus


class PromotionDelegate(Provider):
    promotion: Any

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        result: ReplicaStatus = self.promotion.replicate(image, region, token=token)
        return result

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        result: ReplicaStatus = self.promotion.replica_status(image, region)
        return result

    def share(self, replica: CloudImage, sharing: Any) -> None:
        self.promotion.share(replica, sharing)

    def get_pointer(self, stack: str, region: str) -> str | None:
        result: str | None = self.promotion.get_pointer(stack, region)
        return result

    def set_pointer(self, stack: str, region: str, image_id: str) -> None:
        self.promotion.set_pointer(stack, region, image_id)

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        self.promotion.deprecate(image, replacement=replacement, at=at)

    def delete(self, image: CloudImage) -> None:
        self.promotion.delete(image)
