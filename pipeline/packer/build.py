"""One candidate build: resolved stack + cloud -> build folder -> packer -> artifacts.

The build folder (``<state dir>/builds/<build id>/`` or ``--var-dir``) holds
everything the run used, so it can be repeated by hand:
``<stack>.<cloud>.pkrvars.json`` and ``<stack>.<cloud>.ansible.json`` (written by
``imagectl.packer.variables.write_var_files``), ``templates/`` (the staged template
folder for Packer < 1.7), ``packer.log`` and ``manifest.json``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.spec import CloudSpec
from imagectl.core.errors import UserError
from imagectl.packer.binary import PLUGINS_VERSION, PackerBinary, find_packer
from imagectl.packer.command import build_command
from imagectl.packer.machine_readable import PackerEvent
from imagectl.packer.manifest import Artifact, read_manifest
from imagectl.packer.runner import PackerRun, run
from imagectl.packer.templates import stage_templates
from imagectl.packer.variables import PackerRuntime, write_var_files
from imagectl.paths import Workspace, find_workspace, state_dir
from imagectl.provenance.inventory import IMAGE_FOLDER
from imagectl.provenance.keys import image_trust
from imagectl.stacks.resolve import ResolvedStack
from imagectl.supply.own_wheel import build_validator_wheel
from imagectl.supply.validator import ensure_validator_wheelhouse
from imagectl.toolkit import baked, ensure_toolkit_wheelhouse, target_python

DEFAULT_TIMEOUT_S = 4 * 3600.0


@dataclass
class BuildPlan:
    build_id: str
    stack: str
    cloud: str
    folder: Path
    var_file: Path
    ansible_vars_file: Path
    template_dir: Path
    manifest_file: Path
    command: list[str]
    packer_vars: dict[str, object]
    ansible_vars: dict[str, object]
    env: dict[str, str] = field(default_factory=dict)
    binary: PackerBinary | None = None

    def shell_command(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        cmd = shlex.join(self.command)
        return f"{env} {cmd}" if env else cmd


@dataclass
class BuildResult:
    plan: BuildPlan
    artifacts: list[Artifact]
    run: PackerRun

    def to_dict(self) -> dict[str, object]:
        return {
            "build_id": self.plan.build_id,
            "stack": self.plan.stack,
            "cloud": self.plan.cloud,
            "folder": str(self.plan.folder),
            "manifest": str(self.plan.manifest_file),
            "duration_s": round(self.run.duration_s, 1),
            "artifacts": [a.to_dict() for a in self.artifacts],
        }


# A build id names a folder under the state folder and goes into image names: lowercase
# letters, digits and '-' only (no '/', no '.'), like new_build_id()'s
# ``20261122-042530-ab12cd`` or CI's ``gh-<run id>-<attempt>-<cloud>``.
BUILD_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def check_build_id(value: str) -> str:
    """``--build-id``: refused unless it matches BUILD_ID (it can never leave the state
    folder or break an image name)."""
    if not BUILD_ID.fullmatch(value):
        raise UserError(
            f"--build-id '{value[:80]}' is not a build id: 1-63 lowercase letters, digits "
            "and '-', starting with a letter or digit (e.g. 20261122-042530-ab12cd)",
            hint="Leave --build-id out to get a new one",
        )
    return value


def new_build_id(now: dt.datetime | None = None) -> str:
    """``20261122-042530-1a2b3c``: sortable, unique, valid in every cloud's names."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def git_commit(root: Path) -> str:
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def plan_build(
    resolved: ResolvedStack,
    spec: CloudSpec[Any],
    *,
    workspace: Workspace | None = None,
    build_id: str | None = None,
    var_dir: Path | None = None,
    binary: PackerBinary | None = None,
    overrides: dict[str, str] | None = None,
    skip_provisioning: bool = False,
    validator_wheel: str = "",
    local_base_dir: str = "",
    validator_wheelhouse: str = "",
    validator_toolkit_wheelhouse: str = "",
    base_image: BaseImage | None = None,
) -> BuildPlan:
    """Write the var files and stage the templates; nothing is run. ``base_image``: the
    base the build starts from (``imagectl.building.base_image``)."""
    ws = workspace or find_workspace()
    cloud = spec.name
    enabled = resolved.stack.clouds.enabled()
    if cloud not in enabled:
        raise UserError(
            f"stack '{resolved.name}' has no '{cloud}' cloud",
            hint=f"It builds for: {', '.join(enabled)}. Add clouds.{cloud} to the stack file",
        )
    source = spec.packer_dir(ws.images)
    if not source.is_dir():
        raise UserError(f"no Packer templates for '{cloud}' in {source}")
    bid = check_build_id(build_id) if build_id else new_build_id()
    folder = (var_dir or state_dir() / "builds" / bid).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    manifest_file = folder / "manifest.json"
    runtime = PackerRuntime(
        build_id=bid,
        git_commit=git_commit(ws.root),
        playbook_file=str((ws.playbooks / "site.yml").resolve()),
        manifest_file=str(manifest_file),
        cloud_vars=spec.runtime_packer_vars(resolved, folder, local_base_dir),
        validator_wheel=validator_wheel,
        validator_wheelhouse=validator_wheelhouse,
        validator_toolkit_wheelhouse=validator_toolkit_wheelhouse,
        manifest_nonce=secrets.token_hex(16),
        manifest_fetch_dir=str(folder / IMAGE_FOLDER),
    )
    pvars_path, avars_path, pvars, avars = write_var_files(
        resolved, cloud, folder, runtime, attestation_trust=image_trust(ws), base_image=base_image
    )
    packer = binary or PackerBinary(path="packer", version=PLUGINS_VERSION)
    template_dir = stage_templates(source, folder / "templates", packer)
    extra = dict(overrides or {})
    if skip_provisioning:
        extra["skip_provisioning"] = "true"
    command = build_command(packer, template_dir, pvars_path, extra_vars=extra)
    # ansible-playbook reads ansible.cfg from the current folder only; name it.
    env = {"ANSIBLE_CONFIG": str((ws.playbooks / "ansible.cfg").resolve())}
    return BuildPlan(
        build_id=bid,
        stack=resolved.name,
        cloud=cloud,
        folder=folder,
        var_file=pvars_path,
        ansible_vars_file=avars_path,
        template_dir=template_dir,
        manifest_file=manifest_file,
        command=command,
        packer_vars=pvars,
        ansible_vars=avars,
        env=env,
        binary=packer,
    )


def run_build(
    resolved: ResolvedStack,
    spec: CloudSpec[Any],
    *,
    workspace: Workspace | None = None,
    build_id: str | None = None,
    var_dir: Path | None = None,
    overrides: dict[str, str] | None = None,
    skip_provisioning: bool = False,
    env: dict[str, str] | None = None,
    on_event: Callable[[PackerEvent], None] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    cleanup_timeout: float = 900.0,
    local_base_dir: str = "",
    validator_wheelhouse: str = "",
    before_packer: Callable[[BuildPlan], None] | None = None,
    base_image: BaseImage | None = None,
) -> BuildResult:
    """Build one candidate with the real packer and return its artifacts.

    ``before_packer`` runs once the var files are written and before packer starts (the
    local build provisions its disk natively there, with the plan's Ansible vars).
    """
    ws = workspace or find_workspace()
    binary = find_packer()
    bid = build_id or new_build_id()
    folder = (var_dir or state_dir() / "builds" / bid).resolve()
    wheel = "" if skip_provisioning else build_validator_wheel(ws, folder / "dist")
    # the image carries the toolkit only when the stack bakes it; by default validate-image
    # installs it on the validation host for the run (imagectl.validation.toolkit)
    toolkit = (
        str(ensure_toolkit_wheelhouse(resolved))
        if not skip_provisioning and baked(resolved)
        else ""
    )
    if not skip_provisioning and not validator_wheelhouse:
        # Every cloud installs the validator's dependencies offline, from the locked hashes.
        validator_wheelhouse = str(ensure_validator_wheelhouse(target_python(resolved)))
    plan = plan_build(
        resolved,
        spec,
        workspace=ws,
        build_id=bid,
        var_dir=folder,
        binary=binary,
        overrides=overrides,
        skip_provisioning=skip_provisioning,
        validator_wheel=wheel,
        local_base_dir=local_base_dir,
        validator_wheelhouse=validator_wheelhouse,
        validator_toolkit_wheelhouse=toolkit,
        base_image=base_image,
    )
    if plan.manifest_file.exists():
        plan.manifest_file.unlink()
    if before_packer is not None:
        before_packer(plan)
    bin_dir = str(Path(sys.executable).parent)
    run_env = {
        **(env or {}),
        **plan.env,
        "PATH": f"{bin_dir}{os.pathsep}{(env or os.environ).get('PATH', os.defpath)}",
    }
    result = run(
        plan.command,
        cwd=plan.folder,
        env=run_env,
        on_event=on_event,
        timeout=timeout,
        cleanup_timeout=cleanup_timeout,
        log_file=plan.folder / "packer.log",
    )
    artifacts = read_manifest(plan.manifest_file, plan.packer_vars)
    if not artifacts:
        raise UserError(
            f"packer finished but {plan.manifest_file} lists no artifact",
            hint=f"Look at {plan.folder / 'packer.log'}",
        )
    return BuildResult(plan=plan, artifacts=artifacts, run=result)
