"""The image's inventory: what the manifest role read from dpkg, the validator venv and
modinfo inside the image, its os-release and the .deb hashes apt's indexes hold
(``playbooks/roles/manifest/files/write-inventory.py``), fetched
back to the build folder as ``image/inventory.json`` with the image manifest beside it.

Parsed once here (a corrupt file is exit 2 naming it); the SBOM and ``imagectl diff`` read
the model. What the image reported is bounded before anything is recorded: the document's
size and depth (``imagectl.core.boundedjson``), the number of packages and modules, every
string's length (CycloneDX's 1,024 for a version), and each package named once (a
component's SBOM reference is its name)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from imagectl.core.boundedjson import parse_bounded
from imagectl.core.errors import UserError

INVENTORY_FILE = "inventory.json"
IMAGE_FOLDER = "image"  # below the build folder: what the image itself reported
# Limits on what a host reports. A GPU image lists 1,000-3,000 dpkg packages, a hundred
# Python packages and a few NVIDIA modules in a few hundred KB, three levels deep.
MAX_BYTES = 32 * 1024 * 1024
MAX_DEPTH = 8
MAX_PACKAGES = 100_000
MAX_MODULES = 10_000
HINT = "Build the image again; the manifest role writes it from dpkg and modinfo"

Name = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
Value = Annotated[str, StringConstraints(max_length=1024)]  # CycloneDX: version <= 1024
Path_ = Annotated[str, StringConstraints(max_length=4096)]


Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
OsWord = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class DebPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    version: Value
    source: Value
    source_version: Value
    arch: Value
    # the .deb's SHA256 from apt's package index, when it lists exactly one (dpkg keeps
    # no package hash); absent for a package installed from a file
    sha256: Sha256 | None = None


class OsRelease(BaseModel):
    """os-release(5) of the image: what a scanner matches OS packages against."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: OsWord = Field(pattern=r"^[a-z0-9._-]+$")  # os-release: lowercase, no spaces
    version_id: OsWord | None = Field(None, pattern=r"^[a-zA-Z0-9._~-]+$")
    version_codename: OsWord | None = None
    pretty_name: OsWord | None = None


class PyPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    version: Value


class KernelModule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    version: Value | None = None
    vermagic: Value | None = None
    srcversion: Value | None = None
    license: Value | None = None
    filename: Path_ | None = None


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    kernel: Name
    os: OsRelease | None = None  # inventories of builds before os-release was read: None
    dpkg: list[DebPackage] = Field(max_length=MAX_PACKAGES)
    python: list[PyPackage] = Field(max_length=MAX_PACKAGES)
    kernel_modules: list[KernelModule] = Field(max_length=MAX_MODULES)

    @model_validator(mode="after")
    def _each_named_once(self) -> Inventory:
        for what, names in (
            ("dpkg", (f"{p.name}:{p.arch}" for p in self.dpkg)),
            ("python", (p.name.lower() for p in self.python)),
            ("kernel_modules", (m.name for m in self.kernel_modules)),
        ):
            twice = _repeated(names)
            if twice:
                raise ValueError(f"{twice[:80]!r} is listed twice in {what}")
        return self


def _repeated(names: Iterable[str]) -> str | None:
    counts = Counter(names)
    return next((n for n, k in counts.items() if k > 1), None)


def parse_inventory(text: str | bytes, where: str) -> Inventory:
    doc = parse_bounded(
        text, kind="image inventory", where=where, hint=HINT, max_bytes=MAX_BYTES,
        max_depth=MAX_DEPTH,
    )  # fmt: skip
    try:
        return Inventory.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise UserError(
            f"the image inventory is not valid: {field or '(top level)'}: {first['msg']}",
            where=where,
            hint=HINT,
        ) from None


def load_inventory(path: Path) -> Inventory:
    try:
        with path.open("rb") as fh:
            text = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(
            f"cannot read the image inventory: {exc.strerror or exc}", where=str(path)
        ) from None
    return parse_inventory(text, str(path))
