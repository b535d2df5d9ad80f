"""The names of Azure's pointers, derived here and nowhere else.

"latest" is the gallery image definition ``<gallery>/<image_definition>``: it resolves to
its highest version not excluded from latest (Azure Compute Gallery). The canary is the
version tagged ``imagectl:canary=true`` (a version excluded from latest is used by its
full id). The rules: a gallery name has 1-80 alphanumerics, underscores and periods,
starting and ending with an alphanumeric; an image definition's may also hold hyphens
(Azure Resource Manager, "Naming rules and restrictions for Azure resources",
Microsoft.Compute galleries and galleries/images); a tag name has at most 512 characters
and none of ``< > % & \\ ? /``, a value at most 256 ("Use tags to organize your Azure
resources", Limitations). Lint checks them when it reads the stack (``AzureCloud``).
"""

from __future__ import annotations

import re

from imagectl.tags import TAG_CANARY

KINDS = ("latest", "canary")
CANARY_VALUE = "true"
GALLERY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._]{0,78}[A-Za-z0-9])?$")
DEFINITION = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,78}[A-Za-z0-9])?$")
TAG_FORBIDDEN = set("<>%&\\?/")
MAX_TAG_NAME, MAX_TAG_VALUE = 512, 256
SOURCE = (
    "Azure Resource Manager, naming rules (Microsoft.Compute galleries, galleries/images) "
    "and tag limitations"
)


def names(gallery: str, definition: str) -> dict[str, str]:
    """Every pointer of a stack: kind -> what names it."""
    return {"latest": f"{gallery}/{definition}", "canary": f"{TAG_CANARY}={CANARY_VALUE}"}


def problems(gallery: str, definition: str) -> list[str]:
    out = []
    if not GALLERY.match(gallery):
        out.append(
            f"gallery name '{gallery}': 1-80 letters, digits, '_' and '.', starting and "
            "ending with a letter or digit (no '-')"
        )
    if not DEFINITION.match(definition):
        out.append(
            f"image definition '{definition}': 1-80 letters, digits, '_', '.' and '-', "
            "starting and ending with a letter or digit"
        )
    if len(TAG_CANARY) > MAX_TAG_NAME or TAG_FORBIDDEN & set(TAG_CANARY):
        out.append(f"the canary tag name '{TAG_CANARY}' is one Azure refuses")
    if len(CANARY_VALUE) > MAX_TAG_VALUE:
        out.append(f"the canary tag value '{CANARY_VALUE}' is longer than {MAX_TAG_VALUE}")
    return [f"{p} ({SOURCE})" for p in out]
