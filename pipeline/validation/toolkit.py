"""The GPU toolkit a validation run brings to its hosts (the image does not carry it).

A stack that pins ``validation.toolkit`` with ``install: at-validation`` (the default)
builds images without torch: fleet nodes run the boot profile, which needs none. For a
loaded profile (quick, full, burn) ``imagectl validate-image`` makes the toolkit's hashed
wheelhouse on the controller before any host is launched (``imagectl.toolkit``: a missing
lock or bytes that differ from it stop the run there, exit 2) and ships it to each host
with playbooks/validate.yml: one copy, then the validator's own command installs it with
``--no-index --require-hashes`` into a venv it removes after the run
(``imagectl.validators.toolkit_venv``).

A replaying host judges the toolkit its snapshot recorded: it gets the toolkit only when
the inventory override names one (``toolkit: {lock, index_url}``: a lab mirror, or a
stand-in that exercises the install path in tests).
"""

from __future__ import annotations

from pathlib import Path

from imagectl.stacks.resolve import ResolvedStack
from imagectl.toolkit import baked, ensure_toolkit_wheelhouse
from imagectl.validation.inventory import InventoryOverride
from imagectl.validators.checks.base import LOADED_PROFILES


def run_wheelhouse(
    resolved: ResolvedStack, profile: str, override: InventoryOverride | None
) -> Path | None:
    """The wheelhouse tarball this run ships, or None when no host needs one."""
    if resolved.validator_toolkit is None or baked(resolved) or profile not in LOADED_PROFILES:
        return None
    if override is not None and override.toolkit is not None:
        source = override.toolkit
        return ensure_toolkit_wheelhouse(resolved, lock=source.lock, index_url=source.index_url)
    if override is not None and override.replays_only:
        return None
    return ensure_toolkit_wheelhouse(resolved)


def ships_to(override: InventoryOverride | None, slot: int) -> bool:
    """Whether the host in ``slot`` gets the run's wheelhouse (live, or named by the
    override)."""
    if override is None:
        return True
    return override.toolkit is not None or not override.replays(slot)
