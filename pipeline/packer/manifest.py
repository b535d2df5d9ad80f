"""Artifacts from the manifest post-processor's JSON (one file per build folder).

Packer appends one entry per build and run to ``builds``; only entries of the last run
(``last_run_uuid``) count. ``artifact_id`` differs per builder:

- amazon-ebs: ``us-east-1:ami-0123,...`` (one region for a candidate)
- googlecompute: the image name (the project comes from the build's variables)
- azure-arm: the managed image id; the gallery image version id is derived from the
  build's variables (the version is what imagectl tracks)
- qemu: ``files[].name`` is the qcow2 path
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
    cloud = spec.name if spec else builder
    tags = {str(k): str(val) for k, val in (entry.get("custom_data") or {}).items()}
    run_uuid = str(entry.get("packer_run_uuid", ""))
    raw_id = str(entry.get("artifact_id", ""))
    name = str(v.get("image_name", ""))
    common: dict[str, Any] = {
        "cloud": cloud,
        "builder_type": builder,
        "tags": tags,
        "run_uuid": run_uuid,
    }
    if builder == "amazon-ebs":
        pairs = [p.split(":", 1) for p in raw_id.split(",") if ":" in p]
        return [Artifact(id=ami, location=region, name=name, **common) for region, ami in pairs]
    if builder == "googlecompute":
        project = str(v.get("gcp_project", ""))
        return [Artifact(id=raw_id, location=project, name=raw_id, **common)]
    if builder == "azure-arm":
        version_id = (
            f"/subscriptions/{v.get('azure_subscription_id', '')}"
            f"/resourceGroups/{v.get('azure_gallery_resource_group', '')}"
            f"/providers/Microsoft.Compute/galleries/{v.get('azure_gallery_name', '')}"
            f"/images/{v.get('azure_gallery_image_definition', '')}"
            f"/versions/{v.get('azure_gallery_image_version', '')}"
        )
        return [
            Artifact(id=version_id, location=str(v.get("azure_location", "")), name=name, **common)
        ]
    if builder == "qemu":
        files = [f.get("name", "") for f in entry.get("files") or []]
        disks = [f for f in files if f.endswith(".qcow2")] or files
        return [Artifact(id=d, location=cloud, name=Path(d).name, **common) for d in disks]
    return [Artifact(id=raw_id, location="", name=name, **common)]
