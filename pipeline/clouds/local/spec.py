"""The local cloud: a qcow2 built by Packer's qemu builder from a debootstrap base disk,
kept in the on-disk registry (``imagectl.clouds.local.provider``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagectl.clouds.spec import CloudSpec
from imagectl.stacks.schema import LocalCloud

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

HOST = "local"  # the catalog region of a local candidate
# Packer's qemu pass starts from a disk that `imagectl run` debootstraps and provisions
# natively (imagectl.embedded.base, .provision); a plain `imagectl build` has none.
BASE_MADE_BY_RUN = "<the provisioned base disk imagectl run prepares>"


class LocalSpec(CloudSpec[LocalCloud]):
    name = "local"
    packer_builder = "qemu"
    provider_module = "imagectl.clouds.local.provider"
    remote = False
    ansible_become = False  # the local build logs in as root
    manifest_strip_path = False  # the artifact id is the disk file's path

    def packer_vars(
        self, r: ResolvedStack, settings: LocalCloud, *, build_id: str
    ) -> dict[str, Any]:
        return {
            "local_memory_mib": settings.build.memory_mib,
            "local_cpus": settings.build.cpus,
            "local_disk_gib": settings.build.disk_gib,
            "local_kernel": settings.kernel,
            "local_base_dir": "",
            "local_output_dir": "",
        }

    def runtime_packer_vars(self, r: ResolvedStack, folder: Path, base_dir: str) -> dict[str, str]:
        """The provisioned base disk (``imagectl run`` makes it, ``imagectl.embedded``) and
        the output; a plan made without one shows where it comes from."""
        return {
            "local_base_dir": base_dir or BASE_MADE_BY_RUN,
            "local_output_dir": str(folder / "output"),
        }

    def build_site(self, settings: LocalCloud) -> tuple[str, str]:
        return "localhost", f"qemu {settings.build.cpus} cpu / {settings.build.memory_mib} MiB"

    def build_region(self, settings: LocalCloud) -> str:
        return HOST

    def provider_options(self, settings: LocalCloud) -> dict[str, Any]:
        return {}


SPEC = LocalSpec()
