"""The names of AWS's pointers, derived here and nowhere else.

AWS has no image families: each pointer is an ``aws:ec2:image`` SSM parameter,
``<ssm_parameter_prefix>/<stack>/latest`` and ``<ssm_parameter_prefix>/<stack>/canary``.
PutParameter's naming constraints (Systems Manager API reference, PutParameter "Name";
User Guide, "Creating Parameter Store parameters"): only ``a-zA-Z0-9_.-`` and ``/`` between
levels, a hierarchy begins with ``/``; a name can't be prefixed with "aws" or "ssm"
(case-insensitive; ``/aws/...`` is AWS's public namespace); hierarchies at most fifteen
levels deep; at most 1011 characters, counting the ARN before the name
(``arn:<partition>:ssm:<region>:<account>:parameter``). A stack name (2-40 of ``a-z0-9-``)
adds one level, the pointer's name another, so lint checks the prefix for the longest
stack name (``AwsCloud``), and the provider asks ``parameter_name``, which refuses a name
SSM would refuse instead of sending it (the first promotion failed at PutParameter).
"""

from __future__ import annotations

import re

from imagectl.core.errors import UserError

KINDS = ("latest", "canary")
CHARACTERS = re.compile(r"^(/[A-Za-z0-9_.-]+)+$")
RESERVED = ("aws", "ssm")
MAX_LEVELS = 15
# the ARN before the name, at its longest: a partition, a region and an account id
ARN_BEFORE = len("arn:aws-iso-b:ssm:ap-southeast-5:123456789012:parameter")
MAX_LENGTH = 1011 - ARN_BEFORE
LONGEST_STACK = "s" * 40
SOURCE = "Systems Manager API reference, PutParameter, Name: naming constraints"


def names(prefix: str, stack: str) -> dict[str, str]:
    """Every pointer's parameter for a stack: kind -> name."""
    base = "/" + prefix.strip("/")
    return {kind: f"{base}/{stack}/{kind}" for kind in KINDS}


def name_problems(name: str, shown: str | None = None) -> list[str]:
    """What PutParameter refuses in one parameter name (``shown``: how to name it)."""
    out = []
    shown = shown or name
    if not CHARACTERS.match(name):
        out.append(
            f"'{shown}' holds a character SSM refuses (only letters, digits, '_', '.', '-' "
            "and '/' between levels, from a leading '/')"
        )
    first = name.lstrip("/").lower()
    if first.startswith(RESERVED):
        out.append(
            f"'{shown}' is prefixed with '{first[:3]}': SSM reserves names prefixed with "
            "'aws' or 'ssm' (case-insensitive)"
        )
    levels = len([p for p in name.split("/") if p])
    if levels > MAX_LEVELS:
        out.append(f"'{shown}' is {levels} levels deep: SSM allows at most {MAX_LEVELS}")
    if len(name) > MAX_LENGTH:
        out.append(f"'{shown}' has {len(name)} characters: with its ARN SSM allows {MAX_LENGTH}")
    return out


def problems(prefix: str, stack: str = LONGEST_STACK) -> list[str]:
    """What SSM refuses in any pointer's parameter of the stack (by default: of any
    stack, the longest name standing for them all), each with its source."""
    found = names(prefix, stack)
    if len(set(found.values())) != len(found):  # never: each kind is its own last level
        return [f"the pointers' parameters are not distinct: {found}"]
    shown = names(prefix, "<stack>" if stack == LONGEST_STACK else stack)
    label = shown["latest"].replace("/latest", "/<latest|canary>")
    out: list[str] = []
    for name in found.values():
        out += name_problems(name, label)
    return [f"{p} ({SOURCE})" for p in dict.fromkeys(out)]


def parameter_name(prefix: str, stack: str, kind: str) -> str:
    """The SSM parameter of pointer ``kind`` ("latest" or "canary"); a name SSM would
    refuse is an error naming the setting, never sent."""
    found = problems(prefix, stack)
    if found:
        raise UserError(
            f"SSM parameter of {stack}'s {kind} pointer: " + "; ".join(found),
            hint="Set clouds.aws.ssm_parameter_prefix to a name SSM accepts "
            "(`imagectl lint` checks it)",
        )
    return names(prefix, stack)[kind]
