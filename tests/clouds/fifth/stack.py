"""The fifth cloud's stack section (``clouds.fifth``): a base image by name, the build
site and machine, registered with the stack schema through the spec's ``section``. It lives
in tests/ only: the cloud is registered from outside imagectl (tests/clouds/test_fifth_cloud.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from imagectl.stacks.patterns import ShapeName, pattern
from imagectl.stacks.schema import CloudCommon, Strict
from imagectl.stacks.sections import CloudSection

FifthImage = Annotated[str, pattern(r"^fifth-img-[0-9a-f]{8}$", 20)]


class FifthBuild(Strict):
    site: Annotated[str, pattern(r"^[a-z][a-z0-9-]{1,30}$", 31)]
    machine: ShapeName


class FifthCloud(CloudCommon):
    base_image: FifthImage = Field(description="the base image, pinned by id")
    build: FifthBuild


# it installs EFA as AWS does, so the library's p5 snapshots replay on its shape
SECTION = CloudSection(name="fifth", model=FifthCloud, fabrics=frozenset({"efa"}))
