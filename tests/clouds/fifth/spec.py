"""The fifth cloud: a test cloud registered from outside imagectl (entry point group
``imagectl.clouds``). Its Packer templates are in ``packer/`` beside this file, its shapes
in ``shapes.yaml``, its provider a file-backed fake (``provider.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagectl.clouds.spec import CloudSpec, ProviderOptions
from tests.clouds.fifth.stack import SECTION, FifthCloud

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True, kw_only=True)
class FifthOptions(ProviderOptions):
    site: str = ""
    poll_interval_s: float = 0.0

    def polled(self, seconds: float) -> FifthOptions:
        return replace(self, poll_interval_s=seconds)


class FifthSpec(CloudSpec[FifthCloud]):
    name = "fifth"
    section = SECTION
    fabrics = SECTION.fabrics
    packer_builder = "null"
    provider_module = "tests.clouds.fifth.provider"
    options_type = FifthOptions
    # validation hosts are this machine in the test (an inventory override): no runner
    # address, no account preflight
    remote = False
    templates = HERE / "packer"
    shapes_file = HERE / "shapes.yaml"
    base_image_packer_var = "fifth_base_image"

    def packer_vars(
        self, r: ResolvedStack, settings: FifthCloud, *, build_id: str
    ) -> dict[str, Any]:
        return {"fifth_site": settings.build.site, "fifth_machine": settings.build.machine}

    def build_site(self, settings: FifthCloud) -> tuple[str, str]:
        return settings.build.site, settings.build.machine

    def build_region(self, settings: FifthCloud) -> str:
        return settings.build.site

    def base_image_query(self, settings: FifthCloud) -> str:
        return f"image {settings.base_image}"

    def pinned_base_image(self, settings: FifthCloud) -> str | None:
        return settings.base_image

    def base_image_pin_field(self) -> str:
        return "clouds.fifth.base_image"

    def provider_options(self, settings: FifthCloud) -> FifthOptions:
        return FifthOptions(site=settings.build.site)

    def login_user(self, settings: FifthCloud) -> str:
        return "ubuntu"


SPEC = FifthSpec()
