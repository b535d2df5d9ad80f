"""Promotion: gated cross-region replication, "latest" pointers, rollback, retention.

Python API (the CLI commands ``promote``, ``rollback``, ``deprecate`` and ``block`` are
thin wrappers over these)::

    from imagectl.catalog.db import open_catalog
    from imagectl.clouds.registry import cloud_spec, get_provider
    from imagectl.promotion import promote, rollback, block_image, apply_retention
    from imagectl.stacks import load_resolved

    catalog = open_catalog()
    _, stack = load_resolved(workspace.images, "local")     # ResolvedStack (or a Stack)
    provider = get_provider(cloud_spec("local"))             # registry under <state>/registry
    result = promote(catalog, provider, stack, image,        # catalog id, Image or cloud id
                     regions=None,                           # default: the stack's regions
                     force=False, reason=None,               # force needs a reason
                     dry_run=False,
                     progress=lambda region, step, detail: ...,
                     lock_wait_s=0.0)                        # wait for a concurrent promotion
    result.state          # promoted | partially_promoted | failed | already_promoted | dry_run
    result.exit_code      # 0 promoted, 1 otherwise
    result.regions        # region -> RegionResult(state, replica_id, error, seconds)
    result.resume_command # how to finish a partial promotion
    rollback(catalog, provider, "local")                     # -> RollbackResult
    block_image(catalog, image, reason="...")
    apply_retention(catalog, provider, "local", "local", keep_last=2)
    deprecate_image(catalog, provider, image, reason="...")
    current_pointers(catalog, "local", "local")              # region -> cloud image id

Refusals raise ``GateRefused`` / ``ImageBlocked`` / ``PromotionLocked`` (exit 1) or
``UserError`` (exit 2). Modules: ``gate`` (the receipt rules), ``promote`` (lock, gate,
resume, then the run), ``regions`` (per-region copy/wait/tag/share in threads), ``finish``
(pointer flip or partial close), ``records`` (resumable step records), ``crash`` (the
kill-point test hook), ``rollback``, ``retention`` (keep_last, deprecation, in-use
protection), ``block``, ``groups``, ``results``, ``query``, ``context`` and ``display``
(for the CLI).
"""

from __future__ import annotations

from imagectl.promotion.block import block_image
from imagectl.promotion.gate import CorruptReceipt, GateRefused, ImageBlocked, check_gate
from imagectl.promotion.promote import PromotionResult, RegionResult, promote
from imagectl.promotion.query import current_pointers, promotion_events
from imagectl.promotion.resolve import resolve_image
from imagectl.promotion.retention import apply_retention, delete_image, deprecate_image
from imagectl.promotion.rollback import NothingToRollBack, RollbackResult, rollback

__all__ = [
    "CorruptReceipt",
    "GateRefused",
    "ImageBlocked",
    "NothingToRollBack",
    "PromotionResult",
    "RegionResult",
    "RollbackResult",
    "apply_retention",
    "block_image",
    "check_gate",
    "current_pointers",
    "delete_image",
    "deprecate_image",
    "promote",
    "promotion_events",
    "resolve_image",
    "rollback",
]
