"""The catalog side of a validation run, through the catalog's repository API.

The image row is found (or recorded as ``built``), moved to ``validating``, every
receipt is stored, and the decision moves it to ``validated`` / ``blocked`` /
``inconclusive`` (a host problem that retries could not clear is inconclusive).
"""

from __future__ import annotations

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog, open_catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.core.errors import UserError
from imagectl.validation.decide import BLOCKED, VALIDATED, Decision
from imagectl.validation.fabric.receipt import HOST as FABRIC_HOST
from imagectl.validation.receipts import HostOutcome
from imagectl.validators.receipt import Receipt

STARTABLE = (ImageState.BUILT, ImageState.INCONCLUSIVE, ImageState.VALIDATING)


class CatalogRecorder:
    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or open_catalog()
        self.image_pk: int | None = None

    def start(
        self,
        *,
        cloud: str,
        region: str,
        image_id: str,
        stack: str,
        digest: str,
        tags: dict[str, str],
    ) -> str:
        """Record/find the image and move it to validating; returns the previous state."""
        with self.catalog.transaction() as s:
            row = repo.find_image(s, cloud, region, image_id)
            if row is None:
                row = repo.record_image(
                    s,
                    cloud_image_id=image_id,
                    region=region,
                    cloud=cloud,
                    stack=stack,
                    stack_digest=digest,
                    tags=tags,
                )
            if row.stack_digest != digest:
                raise UserError(
                    f"the catalog records image {image_id} with stack digest "
                    f"{row.stack_digest[:12]}, not {digest[:12]}",
                    hint="Validate it against the stack it was built from",
                )
            previous = str(row.state)
            if previous not in STARTABLE:
                raise UserError(
                    f"image {image_id} is '{previous}' in the catalog; only built or "
                    "inconclusive images are validated",
                    hint="Build a new candidate, or look at `imagectl status`",
                )
            if previous != ImageState.VALIDATING:
                repo.set_state(s, row, ImageState.VALIDATING, reason="validation run started")
            self.image_pk = int(row.id)
            return previous

    def receipt(self, outcome: HostOutcome, *, shape: str) -> None:
        if outcome.receipt is None or self.image_pk is None:
            return
        with self.catalog.transaction() as s:
            repo.record_receipt(
                s, self.image_pk, shape=shape, host=outcome.host, receipt=outcome.receipt
            )

    def fabric(self, receipt: Receipt, *, shape: str) -> None:
        """A multi-node run's fabric receipt: a row of its own (host ``fabric``)."""
        if self.image_pk is None:
            return
        with self.catalog.transaction() as s:
            repo.record_receipt(s, self.image_pk, shape=shape, host=FABRIC_HOST, receipt=receipt)

    def finish(self, decision: Decision) -> str:
        target = (
            decision.verdict
            if decision.verdict in (VALIDATED, BLOCKED)
            else ImageState.INCONCLUSIVE
        )
        if self.image_pk is None:
            return target
        with self.catalog.transaction() as s:
            repo.set_state(
                s,
                self.image_pk,
                target,
                reason="; ".join(decision.reasons)[:2000] or decision.verdict,
                blocked_reason="; ".join(decision.reasons)[:2000] if target == BLOCKED else None,
                details=decision.to_dict(),
            )
        return target
