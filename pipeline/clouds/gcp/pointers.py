"""The names of Google Cloud's pointers, derived here and nowhere else.

"latest" is the stack's production image family (``clouds.gcp.family``); the canary is a
second family beside it, ``<family>-canary`` (one family resolves to one image). A family
name is 1-63 characters and complies with RFC 1035: ``[a-z]([-a-z0-9]*[a-z0-9])?``
(Compute API reference, Image "family"). A name is never cut to fit: at 63 characters a cut
canary would be the production family itself (``promote --canary`` would then move
"latest"), and one cut to end in ``-`` is refused by Compute. So the production family has
at most 56 characters (63 less ``-canary``) and may not end in ``-canary`` itself: every
canary family ends so, and no stack's production family can be another stack's canary.
Lint checks this when it reads the stack (``GcpCloud``); the provider asks ``family_name``,
which refuses a name the rules refuse rather than sending it.
"""

from __future__ import annotations

import re

from imagectl.core.errors import UserError

KINDS = ("latest", "canary")
CANARY_SUFFIX = "-canary"
MAX_LENGTH = 63
FAMILY = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SOURCE = "Compute API reference, Image.family: 1-63 characters, RFC 1035"


def names(family: str) -> dict[str, str]:
    """Every pointer's family for a production family: kind -> name."""
    return {"latest": family, "canary": family + CANARY_SUFFIX}


def problems(family: str) -> list[str]:
    """What Compute (or the rule that no canary is a production family) refuses."""
    out = []
    for kind, name in names(family).items():
        if len(name) > MAX_LENGTH:
            out.append(
                f"the {kind} family '{name}' has {len(name)} characters, more than "
                f"{MAX_LENGTH} ({SOURCE}); the production family may have at most "
                f"{MAX_LENGTH - len(CANARY_SUFFIX)}, as its canary adds '{CANARY_SUFFIX}'"
            )
        elif not FAMILY.match(name):
            out.append(
                f"the {kind} family '{name}' is not an RFC 1035 name (a lowercase letter, "
                f"then lowercase letters, digits and '-', not ending in '-'; {SOURCE})"
            )
    if family.endswith(CANARY_SUFFIX):
        out.append(
            f"the production family '{family}' ends in '{CANARY_SUFFIX}': it is the canary "
            f"family of '{family.removesuffix(CANARY_SUFFIX)}', and a canary never names "
            "production"
        )
    return out


def family_name(family: str, kind: str) -> str:
    """The family of pointer ``kind`` ("latest" or "canary"); a name Compute would refuse
    (or a canary that would be a production family) is an error, never shortened."""
    found = problems(family)
    if found:
        raise UserError(
            f"image family {family}: " + "; ".join(found),
            hint="Set clouds.gcp.family to a shorter name (`imagectl lint` checks it)",
        )
    return names(family)[kind]
