"""The clouds' sections of a stack file (``clouds.<name>``): a hook that ``stacks`` owns
and the clouds fill, so the dependency runs clouds -> stacks and never back.

Each cloud's folder (``imagectl.clouds.<name>.stack``) holds its section's pydantic model
(a ``CloudCommon``), lint's checks of the section (region and zone names the cloud does
not have, what it refuses at launch), and says which of the stack's fabrics
(``network.<name>``) it installs; it hands them over as one ``CloudSection``. The cloud
registry (``imagectl.clouds.registry``, which also reads the clouds registered from outside
the package) fills the hook: its ``stack_sections()`` answers ``sections()``.

Nothing here names a cloud: the stack schema asks ``sections()`` the first time a stack is
validated (not at import, so ``imagectl --help`` loads no cloud), and a stack naming a
cloud nobody registered is refused by the schema (``extra="forbid"``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

    from imagectl.stacks.findings import Finding

# (the cloud's section, images/compat) -> lint's findings about it (``imagectl lint``:
# LOCATION-UNKNOWN for a name the cloud does not have, a launch the cloud refuses...)
SectionCheck = Callable[[Any, Path], Iterator["Finding"]]


@dataclass(frozen=True)
class CloudSection:
    """What one cloud adds to the stack schema."""

    name: str  # the key under ``clouds:``
    model: type[BaseModel]  # a stacks.schema.CloudCommon (not imported: schema imports this)
    # the stack's network sections (``network.<name>``) this cloud's image installs: a
    # fabric set in a stack with none of its clouds is refused
    fabrics: frozenset[str] = frozenset()
    checks: tuple[SectionCheck, ...] = ()
    # A section that existed before stacks were digested writes its absence (``null``)
    # into the stack digest, as the digests made then bind it; a later cloud's absent
    # section is not written, so registering a cloud changes no existing stack's digest.
    written_when_absent: bool = False


# The module that fills the hook (the cloud registry): its ``stack_sections()`` is asked on
# first use, so neither side imports the other at import time.
FILLED_BY = "imagectl.clouds.registry"


def sections() -> Mapping[str, CloudSection]:
    """Every registered cloud's section, by name (the registry's order)."""
    source: Callable[[], Mapping[str, CloudSection]] = importlib.import_module(
        FILLED_BY
    ).stack_sections
    return source()


def section_findings(enabled: Mapping[str, Any], compat_dir: Path) -> Iterator[Finding]:
    """Lint's findings about each of a stack's cloud sections (``stack.clouds.enabled()``),
    by each cloud's checks."""
    registered = sections()
    for name, settings in enabled.items():
        for check in registered[name].checks:
            yield from check(settings, compat_dir)
