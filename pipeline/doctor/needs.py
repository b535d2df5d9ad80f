"""What a run needs, read from the data that defines it: the permission documents
(``images/permissions/<cloud>/<role>``) and the quota each validation shape counts against
(``images/catalog/quotas.yaml``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.errors import UserError
from imagectl.yamlfast import load_data

ROLES = ("build", "validate", "promote", "readonly", "reap", "sign")
# What the build workflow's job does with one identity: build, then validate.
DEFAULT_ROLES = ("build", "validate")
SUFFIX = {"aws": "json", "gcp": "yaml", "azure": "json"}


@dataclass(frozen=True)
class Needed:
    permission: str
    document: str  # images/permissions/<cloud>/<role>.<ext>, each document naming it


def document(images: Path, cloud: str, role: str) -> Path:
    return images / "permissions" / cloud / f"{role}.{SUFFIX[cloud]}"


def permissions(images: Path, cloud: str, roles: tuple[str, ...]) -> list[Needed]:
    """Every permission of the roles' documents (each once, with the first that names it);
    a role's ``sign`` entries are data actions on Azure, which the permissions API also lists."""
    seen: dict[str, Needed] = {}
    for role in roles:
        path = document(images, cloud, role)
        try:
            doc: Any = load_data(path) if cloud == "gcp" else json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot read the permission document ({exc})") from exc
        if cloud == "gcp":
            names = list(doc["includedPermissions"])
        elif cloud == "azure":
            names = list(doc["Actions"]) + list(doc.get("DataActions", []))
        else:
            names = []
            for st in doc["Statement"]:
                action = st["Action"]
                names += [action] if isinstance(action, str) else list(action)
        rel = f"images/permissions/{cloud}/{path.name}"
        for name in names:
            earlier = seen.get(name)
            docs = f"{earlier.document}, {rel}" if earlier else rel
            seen[name] = Needed(name, docs)
    return list(seen.values())


def quota(images: Path, shape: str) -> dict[str, Any] | None:
    data = load_data(images / "catalog" / "quotas.yaml")
    entry = (data.get("shapes") or {}).get(shape)
    return dict(entry) if entry else None
