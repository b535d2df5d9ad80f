"""The image manifest (/etc/imagectl/manifest.json): what the image really contains.

Written at build time by the ``manifest`` role from ground truth (dpkg, apt holds,
modinfo, ncclGetVersion, the validator venv's files; playbooks/roles/manifest/files/
write-manifest.py), read here by the validator (``sw.manifest.agrees``) and by the
controller (``imagectl drift --hosts``). Schema 2 names each pinned component as a field;
schema 1 manifests (older images) carry the driver and fabric manager only inside package
names, which ``driver_from_packages`` reads for them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_DRIVER_PKG = re.compile(
    r"^(?:nvidia-driver-\d+(?:-open|-server)?|nvidia-open-\d+|libnvidia-compute-\d+)$"
)
_FM_PKG = re.compile(r"^nvidia-fabricmanager(?:-\d+)?$")


class ImageManifest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: Literal[1, 2] = 1
    stack: str | None = None
    stack_digest: str | None = None
    image_id: str | None = None
    cloud: str | None = None
    kernel: str | None = Field(default=None, description="the pinned kernel release")
    kernel_modules: Literal["open", "proprietary"] | None = Field(
        default=None, description="nvidia.ko's flavour, from its modinfo license"
    )
    driver: str | None = Field(default=None, description="nvidia.ko's modinfo version")
    fabric_manager: str | None = Field(default=None, description="Debian version installed")
    cuda: str | None = Field(default=None, description="the CUDA toolkit's Debian version")
    nccl: str | None = Field(default=None, description="ncclGetVersion of libnccl.so.2")
    dcgm: str | None = Field(default=None, description="DCGM's Debian version")
    container_toolkit: str | None = Field(default=None, description="Debian version installed")
    validator_toolkit: dict[str, str | None] | None = Field(
        default=None, description="torch and its CUDA variant in the validator venv"
    )
    packages: dict[str, str] = Field(default_factory=dict, description="name -> Debian version")
    held: list[str] = Field(default_factory=list)

    @property
    def driver_version(self) -> str | None:
        """The driver: the field (schema 2), else read from package names (schema 1)."""
        if self.driver:
            return self.driver
        return next((v for k, v in sorted(self.packages.items()) if _DRIVER_PKG.match(k)), None)

    @property
    def fabric_manager_version(self) -> str | None:
        if self.fabric_manager:
            return self.fabric_manager
        return next((v for k, v in sorted(self.packages.items()) if _FM_PKG.match(k)), None)

    @property
    def nccl_version(self) -> str | None:
        return self.nccl or self.packages.get("libnccl2")


def parse_manifest(doc: object) -> ImageManifest:
    """The manifest, or ValueError naming the first field that is wrong."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    try:
        return ImageManifest.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise ValueError(f"{where}: {first['msg']}") from exc
