"""What a stack feeds the build: Packer variables per cloud and Ansible extra vars.

These two functions are the contract between the stack files and the templates:
``imagectl plan`` writes their output, ``imagectl build`` passes it to Packer, and
``imagectl lint`` checks that every name is declared in ``images/<cloud>/variables.pkr.hcl``
or the shared ``images/common/stack.pkr.hcl``, and in a role's
``defaults/main.yml``. Versions come from the resolved stack only.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.registry import cloud_spec
from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write_json
from imagectl.paths import find_workspace
from imagectl.stacks.expectations import image_expectations
from imagectl.stacks.resolve import ResolvedStack
from imagectl.supply.apt_keys import load_apt_keys
from imagectl.supply.efa import load_efa
from imagectl.tags import ARTIFACT_TAG_NAMES, PREFIX, gcp_label_value
from imagectl.toolkit import baked

# Filled in at build time (build id, commit, file paths), not from the stack.
RUNTIME_PACKER_VARS = (
    "build_id",
    "git_commit",
    "ansible_vars_file",
    "playbook_file",
    "manifest_file",
)

CANDIDATE = "candidate"


@dataclass(frozen=True)
class PackerRuntime:
    """What a build fills in at run time, not from the stack: Packer's runtime variables
    (``RUNTIME_PACKER_VARS``), the cloud's own variables that depend on the build's folder
    (``CloudSpec.runtime_packer_vars``: the local disk paths) and the Ansible variables
    the build hands the roles (the validator's wheels, the manifest's fetch folder and
    nonce). A plan leaves them empty."""

    build_id: str = ""
    git_commit: str = ""
    ansible_vars_file: str = ""  # "": the Ansible file written beside the Packer one
    playbook_file: str = ""
    manifest_file: str = ""
    cloud_vars: Mapping[str, str] = field(default_factory=dict)
    validator_wheel: str = ""
    validator_wheelhouse: str = ""
    validator_toolkit_wheelhouse: str = ""
    manifest_fetch_dir: str = ""
    manifest_nonce: str = ""

    def packer_runtime(self) -> dict[str, str]:
        """``RUNTIME_PACKER_VARS`` by name (the Packer var file's runtime part)."""
        return {name: str(getattr(self, name)) for name in RUNTIME_PACKER_VARS}


def artifact_tags(
    r: ResolvedStack, cloud: str, *, build_id: str, git_commit: str, lifecycle: str = CANDIDATE
) -> dict[str, str]:
    """The tags (GCP: labels, in the cloud spec's encoding) of an image built from ``r``."""
    pins = r.pins()
    values = {
        "stack": r.stack.name,
        "stack-digest": r.digest,
        "driver": pins.driver or "none",
        "cuda": pins.cuda or "none",
        "nccl": pins.nccl or "none",
        "build-id": build_id or "none",
        "git-commit": git_commit or "none",
        "lifecycle": lifecycle,
    }
    assert tuple(values) == ARTIFACT_TAG_NAMES
    return cloud_spec(cloud).tags({f"{PREFIX}:{k}": v for k, v in values.items()})


def image_name(r: ResolvedStack, build_id: str) -> str:
    """Candidate image name: valid for AMIs, GCP images (<= 63, [a-z0-9-]) and Azure."""
    suffix = build_id or "unbuilt"
    return gcp_label_value(f"imagectl-{r.stack.name}-{suffix}").strip("-_").replace("_", "-")


def runner_cidrs() -> list[str]:
    """The runner's address(es) from ``IMAGECTL_RUNNER_CIDR`` (comma-separated), as the
    validation stage takes it: the only source Packer's temporary SSH access admits."""
    raw = os.environ.get("IMAGECTL_RUNNER_CIDR", "")
    return [c.strip() for c in raw.split(",") if c.strip()]


def packer_vars(
    r: ResolvedStack,
    cloud: str,
    runtime: PackerRuntime | None = None,
    *,
    base_image_id: str = "",
) -> dict[str, object]:
    """Every Packer variable of ``images/<cloud>/`` that a stack (and a build) sets.

    ``base_image_id`` is the base image the build starts from (the stack's pin, or what
    ``imagectl.building.base_image`` resolved): the cloud's ``base_image_packer_var``.
    A plan made offline leaves it empty; a build always fills it.

    ``runtime.cloud_vars`` fills in the cloud's variables that depend on the build's
    folder (``CloudSpec.runtime_packer_vars``: the local disk paths); each must be one of
    the cloud's own variables."""
    s = r.stack
    pins = r.pins()
    rt = runtime or PackerRuntime()
    build_id = rt.build_id
    common: dict[str, object] = {
        "stack_name": s.name,
        "stack_digest": r.digest,
        "driver_version": pins.driver or "none",
        "cuda_version": pins.cuda or "none",
        "nccl_version": pins.nccl or "none",
        "image_name": image_name(r, build_id),
        "image_tags": artifact_tags(r, cloud, build_id=build_id, git_commit=rt.git_commit),
        **rt.packer_runtime(),
        # the build instance's temporary SSH access admits the runner only
        "ssh_source_cidrs": runner_cidrs(),
    }
    spec = cloud_spec(cloud)
    settings = spec.settings(s)
    common.update(spec.packer_vars(r, settings, build_id=build_id))
    if spec.base_image_packer_var:
        common[spec.base_image_packer_var] = base_image_id or spec.pinned_base_image(settings) or ""
    common.update(
        ansible_become=spec.ansible_become,
        manifest_strip_path=spec.manifest_strip_path,
        deprovision_command=spec.deprovision_command,
    )
    for name, value in rt.cloud_vars.items():
        if name not in common or name in RUNTIME_PACKER_VARS:
            raise TypeError(f"{name} is not a runtime Packer variable of {cloud}")
        common[name] = value
    return common


def efa_pins(version: str | None, stack: str) -> dict[str, str | list[str]]:
    """The efa role's pins for an installer ``version`` the image installs (none: empty)."""
    if not version:
        return {"efa_installer_sha256": "", "efa_key_file": "", "efa_key_fingerprints": []}
    pins = load_efa(find_workspace().compat_dir)
    return {
        "efa_installer_sha256": pins.installer_sha256(
            version, where=f"stack {stack}, network.efa.installer"
        ),
        "efa_key_file": pins.key.key_file,
        "efa_key_fingerprints": list(pins.key.fingerprints),
    }


def ansible_vars(
    r: ResolvedStack,
    cloud: str,
    *,
    validator_wheel: str = "",
    validator_wheelhouse: str = "",
    validator_toolkit_wheelhouse: str = "",
    validator_attestation_trust: dict[str, Any] | None = None,
    manifest_fetch_dir: str = "",
    build_id: str = "",
    manifest_nonce: str = "",
    base_image: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Role-prefixed extra vars for playbooks/site.yml (every name is in a role's defaults).

    ``validator_wheel`` is filled in at build time: the imagectl wheel on the controller;
    ``validator_wheelhouse`` its dependency wheels and their lock
    (``imagectl.supply.validator``; every build passes one: the role installs from hashes
    only, with no package index); ``validator_toolkit_wheelhouse`` the pinned GPU
    toolkit's wheels and lock (``imagectl.toolkit``), installed the same way when the stack
    bakes the toolkit into the image (``validation.toolkit.install: bake``; by default the
    role installs none and validate-image brings it to the validation host);
    ``validator_attestation_trust`` the public keys the image trusts to sign its
    attestation (``imagectl.provenance.keys``), for the boot unit's ``verify-node``;
    ``manifest_fetch_dir`` the build folder the manifest role fetches the image's
    manifest and inventory back to (the SBOM's input); ``build_id`` and
    ``manifest_nonce`` go into the image manifest (unique per build), and so does
    ``base_image`` (``BaseImage.to_dict()``: the base the build started from).
    """
    s = r.stack
    n = s.nvidia
    spec = cloud_spec(cloud)
    c = spec.settings(s)
    apt_keys = load_apt_keys(find_workspace().compat_dir)
    nvidia_key, doca_key = apt_keys["nvidia-cuda"], apt_keys["mellanox-doca"]
    efa_built = "efa" in spec.fabrics and s.network.efa is not None
    baked_toolkit = r.validator_toolkit if baked(r) else None
    out: dict[str, Any] = {
        "base_distro": s.os.distro,
        "base_release": s.os.release,
        "base_kernel_version": c.kernel,
        "base_packages": c.extra_packages,
        "manifest_stack_name": s.name,
        "manifest_stack_digest": r.digest,
        "manifest_cloud": cloud,
        "manifest_components": {p.component: p.names[0] for p in r.packages},
        "manifest_fetch_dir": manifest_fetch_dir,
        "manifest_build_id": build_id,
        "manifest_nonce": manifest_nonce,
        "manifest_base_image": {
            k: str(v) for k, v in (base_image or {}).items() if k in ("id", "name", "source") and v
        },
        "validator_expect": image_expectations(r, cloud).model_dump(mode="json"),
        "validator_wheel": validator_wheel,
        **({"validator_wheelhouse": validator_wheelhouse} if validator_wheelhouse else {}),
        # the validator role installs a toolkit only when the stack bakes it into the image
        "validator_toolkit_torch": (baked_toolkit or {}).get("torch", ""),
        "validator_toolkit_cuda": (baked_toolkit or {}).get("cuda", ""),
        "validator_toolkit_wheelhouse": validator_toolkit_wheelhouse,
        "validator_attestation_trust": validator_attestation_trust or {},
        "validator_watch_enabled": s.validation.watcher,  # the passive watcher
        "nvidia_repo_enabled": bool(n and n.source == "cuda-repo"),
        "nvidia_repo_slug": s.os.repo_slug,
        "nvidia_repo_arch": "sbsa" if s.os.arch == "aarch64" else "x86_64",
        # NVIDIA's repository key and the fingerprints it must have (apt_keys.yaml).
        "nvidia_repo_key_file": nvidia_key.key_file,
        "nvidia_repo_key_fingerprints": list(nvidia_key.fingerprints),
        "nvidia_driver_enabled": n is not None,
        "nvidia_driver_version": n.driver.version if n else "",
        "nvidia_driver_kernel_modules": n.driver.kernel_modules if n else "",
        "fabric_manager_enabled": r.fabric_manager is not None,
        "fabric_manager_version": r.fabric_manager or "",
        "fabric_manager_imex_enabled": r.imex,
        "cuda_toolkit_enabled": n is not None,
        "cuda_toolkit_version": n.cuda if n else "",
        "nccl_enabled": bool(n and n.nccl),
        "nccl_version": (n.nccl if n else None) or "",
        "dcgm_enabled": bool(n and n.dcgm),
        "dcgm_version": (n.dcgm if n else None) or "",
        "container_toolkit_enabled": bool(n and n.container_toolkit),
        "container_toolkit_version": (n.container_toolkit if n else None) or "",
        # the fabric roles (playbooks/roles/<fabric>), where the cloud's section installs
        # that fabric (CloudSection.fabrics) and the stack pins its software (network.<fabric>)
        "efa_enabled": efa_built,
        "efa_installer_version": s.network.efa.installer if s.network.efa else "",
        # the installer's sha256 and AWS's signing key by fingerprint (compat/efa.yaml)
        **efa_pins(s.network.efa.installer if efa_built and s.network.efa else None, r.name),
        "efa_ofi_nccl_version": s.network.efa.ofi_nccl if s.network.efa else "",
        "infiniband_enabled": "infiniband" in spec.fabrics and s.network.infiniband is not None,
        "infiniband_doca_ofed_version": (
            s.network.infiniband.doca_ofed if s.network.infiniband else ""
        ),
        "infiniband_peermem": bool(s.network.infiniband and s.network.infiniband.peermem),
        # DOCA's repository key and the fingerprints it must have (apt_keys.yaml).
        "infiniband_repo_key_file": doca_key.key_file,
        "infiniband_repo_key_fingerprints": list(doca_key.fingerprints),
        # NVIDIA's package names per component (images/compat/packages.yaml): the same
        # lists the image's expect.json checks.
        **{p.var: list(p.names) for p in r.packages},
    }
    return out


def var_file_paths(folder: Path, stack: str, cloud: str) -> tuple[Path, Path]:
    """Where a stack's files for one cloud live in a var folder (plan and build agree).

    ``<stack>.<cloud>.pkrvars.json`` (Packer ``-var-file``; JSON is accepted by Packer
    1.6.6 and later) and ``<stack>.<cloud>.ansible.json`` (``--extra-vars @file``).
    """
    return folder / f"{stack}.{cloud}.pkrvars.json", folder / f"{stack}.{cloud}.ansible.json"


def write_var_files(
    r: ResolvedStack,
    cloud: str,
    folder: Path,
    runtime: PackerRuntime | None = None,
    *,
    attestation_trust: dict[str, Any] | None = None,
    base_image: BaseImage | None = None,
) -> tuple[Path, Path, dict[str, object], dict[str, Any]]:
    """Write both files for ``cloud``: what the build fills in (``runtime``; none: a
    plan's), ``attestation_trust`` the keys the image trusts to sign its attestation.

    The Packer var file points at the Ansible file (``ansible_vars_file``) unless the
    runtime names one. Returns (packer path, ansible path, packer vars, ansible vars).
    """
    pvars_path, avars_path = var_file_paths(folder, r.stack.name, cloud)
    rt = runtime or PackerRuntime()
    avars = ansible_vars(
        r,
        cloud,
        validator_wheel=rt.validator_wheel,
        validator_wheelhouse=rt.validator_wheelhouse,
        validator_toolkit_wheelhouse=rt.validator_toolkit_wheelhouse,
        validator_attestation_trust=attestation_trust,
        manifest_fetch_dir=rt.manifest_fetch_dir,
        build_id=rt.build_id,
        manifest_nonce=rt.manifest_nonce,
        base_image=base_image.to_dict() if base_image else None,
    )
    if not rt.ansible_vars_file:
        rt = dataclasses.replace(rt, ansible_vars_file=str(avars_path))
    pvars = packer_vars(r, cloud, rt, base_image_id=base_image.id if base_image else "")
    atomic_write_json(avars_path, ansible_unsafe(avars), indent=2, sort_keys=True)
    atomic_write_json(pvars_path, pvars, indent=2, sort_keys=True)
    return pvars_path, avars_path, pvars, avars


# A mapping key Ansible receives is a package or variable name; Ansible cannot mark a key
# unsafe, so a key must not hold anything a template could act on.
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.+:-]+")


def ansible_unsafe(value: Any, *, where: str = "") -> Any:
    """``value`` for an Ansible vars file, every string marked unsafe so that Ansible never
    renders it as a Jinja template: ``{"__ansible_unsafe": "..."}`` is the JSON form of
    ``!unsafe`` (ansible-core's vars loader turns it into unsafe text; "Unsafe or raw
    strings", Ansible docs, playbooks_advanced_syntax). A stack value like
    ``{{ lookup('pipe', ...) }}`` then arrives as those characters, never as a command."""
    if isinstance(value, str):
        return {"__ansible_unsafe": value}
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or not _SAFE_KEY.fullmatch(key):
                raise UserError(
                    f"refusing to hand Ansible the key {str(key)[:80]!r}"
                    f"{' under ' + where if where else ''}: keys may hold only letters, "
                    "digits and _ . + : -",
                    hint="Fix the stack file (a package name is lowercase letters, digits, "
                    "+ . -) and run `imagectl lint`",
                )
            out[key] = ansible_unsafe(item, where=where or key)
        return out
    if isinstance(value, (list, tuple)):
        return [ansible_unsafe(item, where=where) for item in value]
    return value
