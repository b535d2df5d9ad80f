"""The image's inventory: what the manifest role read from dpkg, the validator venv and
modinfo inside the image (``playbooks/roles/manifest/files/write-inventory.py``), fetched
back to the build folder as ``image/inventory.json`` with the image manifest beside it.

Parsed once here (a corrupt file is exit 2 naming it); the SBOM and ``imagectl diff`` read
the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from imagectl.errors import UserError

INVENTORY_FILE = "inventory.json"
IMAGE_FOLDER = "image"  # below the build folder: what the image itself reported


class DebPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    source: str
    source_version: str
    arch: str


class PyPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str


class KernelModule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str | None = None
    vermagic: str | None = None
    srcversion: str | None = None
    license: str | None = None
    filename: str | None = None


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    kernel: str
    dpkg: list[DebPackage]
    python: list[PyPackage]
    kernel_modules: list[KernelModule]


def parse_inventory(text: str, where: str) -> Inventory:
    try:
        return Inventory.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        raise UserError(
            f"the image inventory is not JSON (line {exc.lineno}: {exc.msg})",
            where=where,
            hint="Build the image again; the manifest role writes it from dpkg and modinfo",
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise UserError(
            f"the image inventory is not valid: {field}: {first['msg']}",
            where=where,
            hint="Build the image again; the manifest role writes it from dpkg and modinfo",
        ) from None


def load_inventory(path: Path) -> Inventory:
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(
            f"cannot read the image inventory: {exc.strerror or exc}", where=str(path)
        ) from None
    return parse_inventory(text, str(path))
