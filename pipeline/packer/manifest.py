"""Artifacts from the manifest post-processor's JSON (one file per build folder).

Packer appends one entry per build and run to ``builds``; only entries of the last run
(``last_run_uuid``) count. What an entry's ``artifact_id`` and ``files`` mean differs per
builder; the cloud whose template uses that builder reads them
(``CloudSpec.packer_artifacts``, in ``clouds/<cloud>/spec.py``): nothing here knows a
builder's name. An entry no registered cloud builds keeps its artifact id as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.clouds.registry import spec_for_builder
from imagectl.core.boundedjson import depth_of
from imagectl.core.errors import UserError


@dataclass(frozen=True)
class Artifact:
    cloud: str
    builder_type: str
    id: str
    location: str
    name: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    run_uuid: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "builder_type": self.builder_type,
            "id": self.id,
            "location": self.location,
            "name": self.name,
            "tags": dict(self.tags),
            "run_uuid": self.run_uuid,
        }


def read_manifest(path: Path, variables: dict[str, Any] | None = None) -> list[Artifact]:
    """The artifacts of the last run recorded in ``path``; ``variables`` = the var file."""
    v = variables or {}
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise UserError(
            f"Packer's manifest {path} does not exist; the build produced no artifact",
            hint="Look at packer.log in the same folder",
        ) from exc
    if len(data) > 64 << 20 or depth_of(data) > 16:  # measured before parsing
        raise UserError(f"{path}: Packer's manifest is larger or deeper than any it writes")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        line = getattr(exc, "lineno", "?")
        raise UserError(f"{path}:{line}: Packer's manifest is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise UserError(f"{path}: Packer's manifest is not a JSON object")
    last = doc.get("last_run_uuid", "")
    out: list[Artifact] = []
    for entry in doc.get("builds", []):
        if last and entry.get("packer_run_uuid") != last:
            continue
        out.extend(_artifacts(entry, v))
    return out


def _artifacts(entry: dict[str, Any], v: dict[str, Any]) -> list[Artifact]:
    builder = str(entry.get("builder_type", ""))
    spec = spec_for_builder(builder)
    raw_id = str(entry.get("artifact_id", ""))
    files = [str(f.get("name", "")) for f in entry.get("files") or [] if isinstance(f, dict)]
    name = str(v.get("image_name", ""))
    refs = (
        [(r.id, r.location, r.name) for r in spec.packer_artifacts(raw_id, files, v)]
        if spec is not None
        else [(raw_id, "", name)]
    )
    tags = {str(k): str(val) for k, val in (entry.get("custom_data") or {}).items()}
    return [
        Artifact(
            cloud=spec.name if spec is not None else builder,
            builder_type=builder,
            id=id_,
            location=location,
            name=name_,
            tags=tags,
            run_uuid=str(entry.get("packer_run_uuid", "")),
        )
        for id_, location, name_ in refs
    ]
