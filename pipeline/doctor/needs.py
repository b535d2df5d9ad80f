"""What a run needs, read from the data that defines it: the permission documents
(``images/permissions/<cloud>/<role>``) and the quota each validation shape counts against
(``images/catalog/quotas.yaml``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import load_data
from imagectl.doctor.findings import BLOCKER, OK, Finding

ROLES = ("build", "validate", "promote", "readonly", "reap", "sign")
# What the build workflow's job does with one identity: build, then validate.
DEFAULT_ROLES = ("build", "validate")


@dataclass(frozen=True)
class Needed:
    permission: str
    document: str  # images/permissions/<cloud>/<role>.<ext>, each document naming it


@dataclass(frozen=True)
class DocumentFormat:
    """How one cloud writes its permission documents (its doctor module's ``FORMAT``)."""

    suffix: str  # json | yaml
    names: Callable[[Any], list[str]]  # the permissions a parsed document grants


def document(images: Path, cloud: str, role: str, fmt: DocumentFormat) -> Path:
    return images / "permissions" / cloud / f"{role}.{fmt.suffix}"


def permissions(
    images: Path, cloud: str, roles: tuple[str, ...], fmt: DocumentFormat
) -> list[Needed]:
    """Every permission of the roles' documents (each once, with the first that names it);
    a role's ``sign`` entries are data actions on Azure, which the permissions API also lists."""
    seen: dict[str, Needed] = {}
    for role in roles:
        path = document(images, cloud, role, fmt)
        try:
            doc: Any = load_data(path) if fmt.suffix == "yaml" else json.loads(path.read_text())
            names = fmt.names(doc)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: cannot read the permission document ({exc})") from exc
        rel = f"images/permissions/{cloud}/{path.name}"
        for name in names:
            earlier = seen.get(name)
            docs = f"{earlier.document}, {rel}" if earlier else rel
            seen[name] = Needed(name, docs)
    return list(seen.values())


def permission_findings(
    needed: list[Needed], holds: Callable[[str], bool], lacks: Callable[[str], str], held: str
) -> list[Finding]:
    """A blocker for each needed permission the caller does not hold (``lacks``: the line
    saying so; the fix names the documents that grant it), or one line ``held`` when it
    holds them all."""
    missing = [n for n in needed if not holds(n.permission)]
    out = [
        Finding("permissions", BLOCKER, lacks(n.permission), f"add it from {n.document}")
        for n in missing
    ]
    return out or [Finding("permissions", OK, held)]


def quota(images: Path, shape: str) -> dict[str, Any] | None:
    data = load_data(images / "catalog" / "quotas.yaml")
    entry = (data.get("shapes") or {}).get(shape)
    return dict(entry) if entry else None
