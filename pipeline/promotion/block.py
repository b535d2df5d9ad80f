"""``block_image()``: mark an image so that it can never be promoted without ``--force``.

The block is the catalog state ``blocked`` with its reason (``Image.blocked_reason``) and
an ``image.state`` event naming who blocked it and why. The gate refuses a blocked image
(exit 1); ``imagectl promote --force --reason`` overrides it and is recorded.

Given the cloud's ``provider``, blocking a promoted image revokes it
(``imagectl.promotion.revoke``, which needs a signer): it is rolled back first, and a
signed revocation is published beside its attestation, so ``verify`` and nodes refuse it
too (``--force`` does not promote a revoked image). Any other image is blocked in the
catalog: ``verify`` refuses a blocked image (and hands out no envelope), and ``imagectl
revoke`` publishes a signed revocation for deploy jobs and nodes.
"""

from __future__ import annotations

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import TRANSITIONS, ImageState
from imagectl.catalog.models import Image
from imagectl.clouds.base import Provider
from imagectl.core.errors import UserError
from imagectl.promotion.resolve import ImageRef, resolve_image
from imagectl.promotion.revoke import revoke_image


def block_image(
    catalog: Catalog,
    image: ImageRef,
    *,
    reason: str,
    cloud: str | None = None,
    actor: str | None = None,
    provider: Provider | None = None,
) -> Image:
    """Block ``image`` (catalog id, row or cloud id); returns the row. Idempotent."""
    if not reason.strip():
        raise UserError("blocking an image needs --reason '...'")
    if provider is not None and _revoke(catalog, provider, image, reason, cloud, actor):
        with catalog.transaction() as s:
            return resolve_image(s, image, cloud=cloud)
    with catalog.transaction() as s:
        img = resolve_image(s, image, cloud=cloud)
        if img.state == ImageState.BLOCKED.value:
            repo.log_event(
                s,
                "image.block",
                f"{img.label} is already blocked; again: {reason}",
                image=img,
                actor=actor,
                details={"reason": reason},
            )
            return img
        if ImageState.BLOCKED not in TRANSITIONS[ImageState(img.state)]:
            hint = (
                "Roll it back first (`imagectl rollback --stack "
                f"{img.stack} --cloud {img.cloud}`), then block it"
            )
            if img.state not in (ImageState.PROMOTED, ImageState.PARTIALLY_PROMOTED):
                hint = "See the transition table in imagectl/catalog/lifecycle.py"
            raise UserError(f"image {img.label} is '{img.state}' and cannot be blocked", hint=hint)
        repo.set_state(
            s,
            img,
            ImageState.BLOCKED,
            reason=f"blocked: {reason}",
            blocked_reason=reason,
            actor=actor,
        )
        return img


def _revoke(
    catalog: Catalog,
    provider: Provider,
    image: ImageRef,
    reason: str,
    cloud: str | None,
    actor: str | None,
) -> bool:
    """Revoke a promoted image (rolled back first); False: a plain block."""
    with catalog.transaction() as s:
        img = resolve_image(s, image, cloud=cloud)
        promoted = img.state in (ImageState.PROMOTED, ImageState.PARTIALLY_PROMOTED)
        pk = img.id
    if not promoted:
        return False
    revoke_image(catalog, provider, pk, reason=reason, actor=actor)
    return True
