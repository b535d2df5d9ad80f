"""The local cloud's build step, as the build stage (``imagectl.building``) runs it.

A local candidate needs what a cloud's base image gives Packer elsewhere: a Debian base
disk (debootstrap, cached: ``imagectl.embedded.base``), then ``playbooks/site.yml``
natively in a chroot and Packer's qemu builder for the ``booted`` roles
(``imagectl.embedded.candidate``). The disk is kept by its inputs, so ``reuse`` skips
the build when nothing that goes into the image changed. ``inject_fault`` alters a copy
(``imagectl.embedded.faults``). The result is imported into the registry's build region
with its boot files, as a cloud's build leaves an image in its build region.

``prepare`` (base, accelerator, cached candidate) and ``build``/``publish`` are separate so
that the stage records a build before a long Packer run and adopts a reused one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from imagectl.clouds.local.provider import LocalProvider
from imagectl.clouds.local.spec import SPEC as LOCAL
from imagectl.clouds.local.stack import LocalCloud
from imagectl.clouds.local.vms import BootFiles
from imagectl.core.errors import UserError
from imagectl.embedded import FAULTS, faults
from imagectl.embedded.accel import AccelChoice, choose_accel
from imagectl.embedded.base import BaseImage, BaseSpec, ensure_base
from imagectl.embedded.candidate import Candidate, build_candidate, find_cached, inputs_key
from imagectl.embedded.procs import Children
from imagectl.embedded.progress import Progress
from imagectl.packer.manifest import Artifact
from imagectl.paths import Workspace, state_dir
from imagectl.stacks.resolve import ResolvedStack
from imagectl.tags import TAG_BUILD


@dataclass
class LocalPrep:
    base: BaseImage
    accel: AccelChoice
    cached: Candidate | None
    children: Children
    progress: Progress


@dataclass(frozen=True)
class LocalBuildDetails:
    """What the local build adds to its outcome: the base disk, the accelerator, the
    candidate's disk and whether it was reused."""

    candidate_reused: bool
    base_key: str
    base_folder: str
    base_cached: bool
    accel: str
    accel_reason: str
    disk: str

    def base(self) -> dict[str, object]:
        return {"key": self.base_key, "folder": self.base_folder, "cached": self.base_cached}

    def accelerator(self) -> dict[str, object]:
        return {"name": self.accel, "reason": self.accel_reason}

    def to_dict(self) -> dict[str, object]:
        """``imagectl build --json``'s local part."""
        return {
            "candidate_reused": self.candidate_reused,
            "base": self.base(),
            "accel": self.accelerator(),
            "disk": self.disk,
        }


@dataclass(frozen=True)
class Published:
    artifact: Artifact
    disk: Path
    details: LocalBuildDetails
    fault: dict[str, str] | None = None


def quiet_progress() -> Progress:
    return Progress(Console(stderr=True, quiet=True), live=False)


def check_fault(name: str | None) -> None:
    if name and name not in FAULTS:
        raise UserError(f"unknown fault '{name}'", hint=f"Use one of: {', '.join(FAULTS)}")


def prepare(
    ws: Workspace,
    resolved: ResolvedStack,
    children: Children,
    progress: Progress,
    *,
    accel: str = "auto",
    rebuild_base: bool = False,
) -> LocalPrep:
    spec = BaseSpec.from_stack(resolved)  # UserError without clouds.local / not Debian
    with progress.step("base", "Base image: Debian debootstrap") as st:
        base = ensure_base(spec, children, st.note, rebuild=rebuild_base)
        st.note(("reused cached" if base.cached else "built") + f" {base.folder}")
    with progress.step("accel", "Accelerator: KVM probe") as st:
        choice = choose_accel(accel, base.kernel, children)
        st.note(f"{choice.name}: {choice.reason}")
    cached = find_cached(inputs_key(ws, resolved, base))
    return LocalPrep(base=base, accel=choice, cached=cached, children=children, progress=progress)


def build(
    ws: Workspace,
    resolved: ResolvedStack,
    prep: LocalPrep,
    *,
    build_id: str,
    timeout_s: float,
    var_dir: Path | None = None,
) -> Candidate:
    """Provision in a chroot and run Packer's qemu build (always builds)."""
    return build_candidate(
        ws, resolved, prep.base, accel=prep.accel.name, build_id=build_id,
        progress=prep.progress, children=prep.children, timeout=timeout_s, var_dir=var_dir,
    )  # fmt: skip


def publish(
    resolved: ResolvedStack,
    prep: LocalPrep,
    candidate: Candidate,
    *,
    region: str,
    inject_fault: str | None = None,
    provider: LocalProvider | None = None,
) -> Published:
    """The candidate (or a faulty copy of it) imported into ``region`` with its boot files."""
    local = resolved.stack.clouds.section_of(LocalCloud)
    assert local is not None  # prepare checked it
    disk = candidate.path
    fault = None
    if inject_fault:
        with prep.progress.step("fault", f"Inject fault: {inject_fault}") as st:
            folder = state_dir() / LOCAL.name / "faults" / candidate.build_id
            folder.mkdir(parents=True, exist_ok=True)
            disk = folder / f"{inject_fault}.qcow2"
            injected = faults.inject(
                prep.children, inject_fault, candidate.path, disk,
                pinned_packages=list(local.packages),
            )  # fmt: skip
            st.note(injected.detail)
        fault = injected.to_dict()
    registry = provider or LocalProvider()
    with prep.progress.step("import", f"Register candidate in {region}") as st:
        image = registry.import_image(
            disk, region=region, stack=resolved.name, digest=resolved.digest,
            name=f"imagectl-{resolved.name}-{candidate.build_id}",
            tags={TAG_BUILD: candidate.build_id},
            boot=BootFiles(prep.base.kernel, prep.base.initrd, prep.accel.name),
        )  # fmt: skip
        st.note(image.image_id[:19] + "…")
    artifact = Artifact(
        cloud=LOCAL.name, builder_type=LOCAL.packer_builder, id=image.image_id, location=region,
        name=image.name, tags={TAG_BUILD: candidate.build_id},
    )  # fmt: skip
    details = LocalBuildDetails(
        candidate_reused=candidate.reused,
        base_key=prep.base.folder.name,
        base_folder=str(prep.base.folder),
        base_cached=prep.base.cached,
        accel=prep.accel.name,
        accel_reason=prep.accel.reason,
        disk=str(disk),
    )
    return Published(artifact=artifact, disk=disk, details=details, fault=fault)
