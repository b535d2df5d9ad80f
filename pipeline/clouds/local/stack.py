"""The local cloud's section of a stack file (``clouds.local``): the debootstrap base,
its apt mirror, the QEMU build's size and the extra Debian packages the image pins.
Its regions are folders of the on-disk registry, so any name is one (no location check).
Registered with the stack schema through ``SECTION`` (``imagectl.stacks.sections``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from imagectl.stacks.patterns import DebName, DebVersion, MirrorUrl
from imagectl.stacks.schema import CloudCommon, Strict
from imagectl.stacks.sections import CloudSection


class LocalBuild(Strict):
    memory_mib: int = Field(2048, ge=512)
    cpus: int = Field(2, ge=1)
    disk_gib: int = Field(4, ge=2)


class LocalCloud(CloudCommon):
    base_image: Literal["debootstrap"] = "debootstrap"
    mirror: MirrorUrl = "http://deb.debian.org/debian"
    build: LocalBuild = Field(default_factory=LocalBuild)
    packages: dict[DebName, DebVersion] = Field(
        default_factory=dict, description="extra packages pinned to exact versions"
    )

    @property
    def extra_packages(self) -> dict[str, str]:
        return dict(self.packages)


SECTION = CloudSection(name="local", model=LocalCloud, written_when_absent=True)
