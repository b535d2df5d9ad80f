"""The fifth cloud's provider: images and instances kept as JSON files in the folder
``$FIFTH_CLOUD_STATE`` names (the test's "cloud console" seeds images there), so every
``imagectl`` process of a test sees the same cloud. Validation hosts it launches are this
machine (the test's inventory override runs the validator over a local connection)."""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from imagectl.clouds.base import (
    CloudImage,
    ImageQuery,
    Instance,
    LaunchRequest,
    Provider,
    ReplicaStatus,
)
from imagectl.stacks.schema import Sharing
from tests.clouds.fifth.spec import SPEC, FifthOptions

NAME = "fifth"


def state_dir() -> Path:
    path = Path(os.environ["FIFTH_CLOUD_STATE"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def _read(kind: str) -> list[dict[str, Any]]:
    path = state_dir() / f"{kind}.json"
    return json.loads(path.read_text()) if path.is_file() else []


def _write(kind: str, rows: list[dict[str, Any]]) -> None:
    (state_dir() / f"{kind}.json").write_text(json.dumps(rows, default=str))


def seed_image(image_id: str, site: str, tags: dict[str, str]) -> CloudImage:
    """What the cloud's console would do: an available image with ``tags``."""
    image = CloudImage(cloud=NAME, region=site, image_id=image_id, name=image_id,
                       state="available", tags=dict(tags))  # fmt: skip
    _write("images", [*_read("images"), _image_row(image)])
    return image


def _image_row(image: CloudImage) -> dict[str, Any]:
    row = asdict(image)
    row["created_at"] = None
    return row


def _image(row: dict[str, Any]) -> CloudImage:
    return CloudImage(**row)


def _instance(row: dict[str, Any]) -> Instance:
    row = dict(row)
    if row.get("launched_at"):
        row["launched_at"] = dt.datetime.fromisoformat(row["launched_at"])
    return Instance(**row)


class FifthProvider(Provider):
    spec = SPEC
    cloud = NAME

    def __init__(self, options: FifthOptions) -> None:
        self.options = options

    def query_images(self, query: ImageQuery) -> list[CloudImage]:
        out = [_image(r) for r in _read("images")]
        if query.stack:
            out = [i for i in out if i.tags.get("imagectl:stack") == query.stack]
        if query.digest:
            out = [i for i in out if i.tags.get("imagectl:stack-digest") == query.digest]
        if query.state:
            out = [i for i in out if i.tags.get("imagectl:state") == query.state]
        return [i for i in out if query.region in (None, i.region)]

    def get_image(self, image_id: str, region: str) -> CloudImage | None:
        return next((i for i in map(_image, _read("images")) if i.image_id == image_id), None)

    def set_tags(self, image: CloudImage, tags: dict[str, str]) -> None:
        rows = _read("images")
        for row in rows:
            if row["image_id"] == image.image_id:
                row["tags"] = {**row["tags"], **tags}
        _write("images", rows)

    def launch(self, request: LaunchRequest) -> Instance:
        now = dt.datetime.now(dt.timezone.utc)
        instance = Instance(
            cloud=NAME,
            region=request.location or request.image.region,
            instance_id=f"fifth-i-{uuid.uuid4().hex[:8]}",
            shape=request.shape,
            image_id=request.image.image_id,
            state="running",
            address="127.0.0.1",
            tags={
                "imagectl:managed": "true",
                "imagectl:expires-at": (now + request.ttl).isoformat(),
            },
            launched_at=now,
        )
        _write("instances", [*_read("instances"), asdict(instance)])
        return instance

    def wait_reachable(self, instance: Instance, *, timeout_s: float) -> Instance:
        return instance

    def terminate(self, instance: Instance) -> None:
        rows = [r for r in _read("instances") if r["instance_id"] != instance.instance_id]
        _write("instances", rows)

    def list_instances(self, *, managed_only: bool = True) -> list[Instance]:
        return [_instance(r) for r in _read("instances")]

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        return ReplicaStatus(region, "available", image.image_id)

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        return ReplicaStatus(region, "available", image.image_id)

    def share(self, replica: CloudImage, sharing: Sharing) -> None:
        return None

    def get_pointer(self, stack: str, region: str) -> str | None:
        return None

    def set_pointer(self, stack: str, region: str, image_id: str) -> None:
        return None

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        return None

    def delete(self, image: CloudImage) -> None:
        return None


def create_provider(options: FifthOptions) -> FifthProvider:
    return FifthProvider(options)
