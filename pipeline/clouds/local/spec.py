"""The local cloud: a qcow2 built by Packer's qemu builder from a debootstrap base disk,
kept in the on-disk registry (``imagectl.clouds.local.provider``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagectl.clouds.local.stack import SECTION, LocalCloud
from imagectl.clouds.spec import ArtifactRef, CloudSpec, ProviderOptions

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

# Packer's qemu pass starts from a disk the build debootstraps and provisions natively
# (imagectl.building.local); a plan made before a build names it so.
BASE_MADE_BY_BUILD = "<the provisioned base disk the local build prepares>"
# The local cloud's login: the key a launch hands in goes to root (fw_cfg, see
# imagectl.clouds.local.guest_setup); sshd admits root with a key only.
LOGIN_USER = "root"


@dataclass(frozen=True, kw_only=True)
class LocalOptions(ProviderOptions):
    """What ``LocalProvider`` is built from: the stack's clouds.local section
    (``provider_options``), the environment and a caller's overrides. A misspelt
    option is a TypeError here, never silently dropped."""

    root: str | Path | None = None
    latency: str | float | dict[str, float] | None = None
    fail: str | dict[str, str] | None = None
    link: bool = True
    login_user: str = LOGIN_USER
    memory_mib: int = 2048
    cpus: int = 2
    poll_interval_s: float | None = None
    # instances start from the image's saved boot (imagectl.clouds.local.saved_boot): the
    # first launch of an image saves its finished boot, later ones restore it (~7 s of CPU
    # to a login where a TCG boot takes ~55); None: $IMAGECTL_LOCAL_SAVED_BOOTS, else on
    saved_boots: bool | None = None

    def polled(self, seconds: float) -> LocalOptions:
        return replace(self, poll_interval_s=seconds)


class LocalSpec(CloudSpec[LocalCloud]):
    name = "local"
    section = SECTION
    packer_builder = "qemu"
    provider_module = "imagectl.clouds.local.provider"
    options_type = LocalOptions
    remote = False
    ansible_become = False  # the local build logs in as root
    manifest_strip_path = False  # the artifact id is the disk file's path
    builds_base_disk = True

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
        """The provisioned base disk (the local build makes it) and the output; a plan made
        without one shows where it comes from."""
        return {
            "local_base_dir": base_dir or BASE_MADE_BY_BUILD,
            "local_output_dir": str(folder / "output"),
        }

    def build_site(self, settings: LocalCloud) -> tuple[str, str]:
        return "localhost", f"qemu {settings.build.cpus} cpu / {settings.build.memory_mib} MiB"

    def build_region(self, settings: LocalCloud) -> str:
        """The registry region a candidate is imported into (the first of the stack's)."""
        return settings.regions[0]

    def login_user(self, settings: LocalCloud) -> str:
        return LOGIN_USER

    def provider_options(self, settings: LocalCloud) -> LocalOptions:
        return LocalOptions(
            login_user=self.login_user(settings),
            memory_mib=settings.build.memory_mib,
            cpus=settings.build.cpus,
        )

    def packer_artifacts(
        self, artifact_id: str, files: list[str], variables: Mapping[str, Any]
    ) -> list[ArtifactRef]:
        """qemu lists its output files; the qcow2 is the image (its path is its id)."""
        disks = [f for f in files if f.endswith(".qcow2")] or files
        return [ArtifactRef(id=d, location=self.name, name=Path(d).name) for d in disks]


SPEC = LocalSpec()
