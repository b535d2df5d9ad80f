"""Build the local candidate: site.yml natively in a chroot, then Packer's qemu builder.

``build_candidate`` calls the same ``imagectl.packer.build.run_build`` as ``imagectl
build`` (images/local/ template, the stack's pins as Packer and Ansible variables) with
the chosen accelerator. Before Packer starts, ``provision`` runs site.yml's roles in a
chroot of the cached base image's root (native speed) and writes the disk Packer boots;
Packer's Ansible provisioner then runs the roles tagged ``booted`` in the VM.

Each finished candidate is also kept in ``<state dir>/local/candidates/<inputs key>/``
so that a later run asked to ``reuse`` it (the fault demonstration, CI's second run)
skips the build when nothing that goes into the image changed: the stack digest, the
base image, the template, the playbooks and the imagectl sources that become the
validator wheel.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.clouds.local.qemu import cpu_model
from imagectl.clouds.local.spec import SPEC as LOCAL
from imagectl.clouds.local.stack import LocalCloud
from imagectl.core.errors import UserError
from imagectl.embedded.base import BaseImage, ancestry
from imagectl.embedded.procs import Children
from imagectl.embedded.progress import Progress, Step
from imagectl.embedded.provision import BOOTED_TAG, provision, provisioned_dir
from imagectl.embedded.wheelhouse import ensure_wheelhouse
from imagectl.packer.build import BuildPlan, run_build
from imagectl.packer.templates import common_dir
from imagectl.paths import Workspace, state_dir
from imagectl.stacks.resolve import ResolvedStack

Note = Callable[[str], None]
# What ends up in the image besides the stack and the base: the playbooks, the validator
# (validators/), the dependency list and the code that provisions the root natively.
# Other controller code (pipeline/) is in the wheel too but does not run in the image;
# --rebuild builds anyway.
SOURCE_FOLDERS = ("validators", "playbooks")
SOURCE_FILES = ("pyproject.toml", "pipeline/embedded/provision.py", "pipeline/embedded/chroot.py")


@dataclass(frozen=True)
class Candidate:
    path: Path
    build_id: str
    reused: bool
    manifest: dict[str, object]
    build_folder: Path | None = None


def stop_ssh_masters(control_dir: Path) -> list[int]:
    """Stop the SSH master processes whose control sockets are in ``control_dir``."""
    stopped = []
    needle = str(control_dir).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and cmdline.split(b"\0")[0].endswith(b"ssh"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGTERM)
                stopped.append(int(entry))
    shutil.rmtree(control_dir, ignore_errors=True)
    return stopped


def inputs_key(ws: Workspace, resolved: ResolvedStack, base: BaseImage) -> str:
    """Hash of everything that goes into the candidate."""
    digest = hashlib.sha256()
    digest.update(f"{resolved.digest}\n{base.folder.name}\n".encode())
    templates = LOCAL.packer_dir(ws.images)
    roots = [templates, common_dir(templates), *(ws.root / f for f in SOURCE_FOLDERS)]
    files = [ws.root / f for f in SOURCE_FILES if (ws.root / f).is_file()]
    for root in roots:
        if root.is_dir():
            files += sorted(root.rglob("*"))
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(ws.root)).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _cache_dir(key: str) -> Path:
    return state_dir() / LOCAL.name / "candidates" / key


def find_cached(key: str) -> Candidate | None:
    folder = _cache_dir(key)
    meta_file = folder / "candidate.json"
    disk = folder / "candidate.qcow2"
    if not (meta_file.is_file() and disk.is_file()):
        return None
    meta = json.loads(meta_file.read_text())
    return Candidate(path=disk, build_id=meta["build_id"], reused=True, manifest=meta)


def _keep(key: str, disk: Path, build_id: str, manifest: dict[str, object]) -> Path:
    folder = _cache_dir(key)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    dest = folder / "candidate.qcow2"
    try:
        os.link(disk, dest)
    except OSError:
        shutil.copyfile(disk, dest)
    (folder / "candidate.json").write_text(
        json.dumps({"build_id": build_id, **manifest}, indent=2, default=str) + "\n"
    )
    return dest


def build_candidate(
    ws: Workspace,
    resolved: ResolvedStack,
    base: BaseImage,
    *,
    accel: str,
    build_id: str,
    progress: Progress,
    children: Children,
    env: dict[str, str] | None = None,
    timeout: float = 3600,
    var_dir: Path | None = None,
) -> Candidate:
    """Two progress steps: ``provision`` (site.yml natively in a chroot, see
    ``provision``) then ``build`` (Packer's qemu build runs the booted roles)."""
    local = resolved.stack.clouds.section_of(LocalCloud)
    assert local is not None
    started = time.monotonic()
    build_step: list[Step] = []

    def on_event(event: Any) -> None:
        if event.type != "ui" or not build_step:
            return
        for raw in reversed((event.text or "").splitlines()):
            line = raw.split("qemu.candidate:", 1)[-1].strip().rstrip("*").strip()
            if line and line != "==>":
                build_step[0].note(line[:160])
                return

    # Ansible's SSH master connections (ControlPersist) leave packer's process group; their
    # sockets live in a folder of this build so that they can be found and stopped. A
    # socket path has at most 107 bytes (ssh adds a random suffix while it binds): the
    # folder is a short one in /tmp, not below a state folder of any length.
    control_dir = Path(tempfile.mkdtemp(prefix="ictl-ssh-", dir="/tmp"))
    folder = (var_dir or state_dir() / "builds" / build_id).resolve()
    with contextlib.ExitStack() as provision_step, contextlib.ExitStack() as packer_step:
        st = provision_step.enter_context(
            progress.step("provision", "Provision: playbooks/site.yml natively in a chroot")
        )
        st.note("validator dependency wheels (pip download, cached)")
        wheelhouse = ensure_wheelhouse()
        st.note("imagectl wheel for the validator role")

        def before_packer(plan: BuildPlan) -> None:
            provision(
                base=base,
                build_folder=plan.folder,
                playbook=Path(str(plan.packer_vars["playbook_file"])),
                ansible_vars_file=plan.ansible_vars_file,
                ansible_config=Path(plan.env["ANSIBLE_CONFIG"]),
                kernel=local.kernel,
                disk_gib=local.build.disk_gib,
                children=children,
                note=st.note,
                timeout=max(60.0, timeout - (time.monotonic() - started)),
            )
            provision_step.close()
            build_step.append(
                packer_step.enter_context(
                    progress.step(
                        "build", f"Build: packer qemu ({accel}) + site.yml's {BOOTED_TAG} roles"
                    )
                )
            )

        try:
            result = run_build(
                resolved,
                LOCAL,
                workspace=ws,
                build_id=build_id,
                var_dir=folder,
                overrides={
                    "local_accelerator": accel,
                    "local_cpu_model": cpu_model(accel),
                    "ansible_tags": BOOTED_TAG,
                },
                env={
                    **(env or {}),
                    "ANSIBLE_PIPELINING": "True",
                    "ANSIBLE_HOST_KEY_CHECKING": "False",
                    "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
                    "ANSIBLE_SSH_CONTROL_PATH": "%(directory)s/%%C",  # a hash: fixed length
                    # Debian 12's python3: no interpreter discovery round trip under TCG
                    "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
                    # An emulated guest on a busy machine answers slowly: wait, and retry
                    # a dropped connection instead of calling the host unreachable.
                    "ANSIBLE_TIMEOUT": "120",
                    "ANSIBLE_SSH_RETRIES": "5",
                },
                on_event=on_event,
                timeout=timeout,
                local_base_dir=str(provisioned_dir(folder)),
                base_image=ancestry(base.spec),
                validator_wheelhouse=str(wheelhouse),
                before_packer=before_packer,
            )
        finally:
            stop_ssh_masters(control_dir)
        shutil.rmtree(provisioned_dir(folder), ignore_errors=True)  # Packer made its copy
    disks = [Path(a.id) for a in result.artifacts if str(a.id).endswith(".qcow2")]
    if not disks or not disks[0].is_file():
        raise UserError(
            f"packer's manifest names no qcow2 disk: {[a.id for a in result.artifacts]}",
            hint=f"Look at {result.plan.folder / 'packer.log'}",
        )
    key = inputs_key(ws, resolved, base)
    manifest = {
        "inputs_key": key,
        "artifacts": [a.to_dict() for a in result.artifacts],
        "build_folder": str(result.plan.folder),
        "packer_s": round(result.run.duration_s, 1),
    }
    kept = _keep(key, disks[0], build_id, manifest)
    return Candidate(
        path=kept,
        build_id=build_id,
        reused=False,
        manifest=manifest,
        build_folder=result.plan.folder,
    )
