"""The build matrix (stack x cloud x build location x validation shapes x target regions x
base image) and the resolved variable files the build would use.

Each row's base image is resolved to the cloud's id (``imagectl.building.base_image``):
the stack's pin, else the cloud's newest answer to its query, which the Packer var file
then names. ``offline`` asks no cloud (pins only); a cloud that cannot answer (no
credentials, unreachable) leaves its row unresolved with the reason, beside the rows
that could be resolved."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from imagectl.building.base_image import pinned_base_image, resolve_base_image
from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.registry import cloud_spec
from imagectl.clouds.sdk_errors import translate
from imagectl.clouds.spec import CloudSpec
from imagectl.compat.data import load_compat
from imagectl.core.errors import CloudError, UserError
from imagectl.packer.variables import write_var_files
from imagectl.paths import Workspace
from imagectl.stacks.loader import find_stack, load_stack, stack_paths
from imagectl.stacks.resolve import ResolvedStack, resolve
from imagectl.stacks.schema import CloudCommon


@dataclass(frozen=True)
class PlanRow:
    stack: str
    digest: str
    cloud: str
    build_location: str
    build_machine: str
    validation_shapes: list[str]
    target_regions: list[str]
    packer_var_file: str
    ansible_var_file: str
    # the base image by id (BaseImage.to_dict()), or None with the reason in base_image_error
    base_image: dict[str, object] | None = None
    base_image_error: str | None = None


def _base_image(
    r: ResolvedStack, spec: CloudSpec[CloudCommon], offline: bool
) -> tuple[BaseImage | None, str | None]:
    """(base image, why not): the pin offline, else the pin or the cloud's answer."""
    if offline:
        if spec.builds_base_disk:
            return resolve_base_image(r, spec), None
        pinned = pinned_base_image(r, spec)
        why = None if pinned else "offline: the stack pins none; the build resolves it"
        return pinned, why
    try:
        return resolve_base_image(r, spec), None
    except (UserError, CloudError) as exc:
        return None, exc.render().strip()
    except Exception as exc:
        known = translate(exc)
        if known is None:
            raise
        return None, known.render().strip()


def build_plan(
    ws: Workspace, stack: str | None, cloud: str | None, out_dir: Path, *, offline: bool = False
) -> list[PlanRow]:
    if cloud is not None:
        cloud_spec(cloud)  # UserError on an unknown cloud, before any file is read
    paths = [find_stack(ws.stacks_dir, stack)] if stack else stack_paths(ws.stacks_dir)
    data = load_compat(ws.compat_dir)
    rows: list[PlanRow] = []
    for path in paths:
        loaded = load_stack(path)
        r = resolve(loaded.stack, data)
        enabled = loaded.stack.clouds.enabled()
        if cloud is not None and stack is not None and cloud not in enabled:
            raise UserError(
                f"stack '{r.name}' has no '{cloud}' cloud",
                where=str(path),
                hint=f"Its clouds: {', '.join(enabled)}",
            )
        for name, cfg in enabled.items():
            if cloud is not None and name != cloud:
                continue
            spec = cloud_spec(name)
            location, machine = spec.build_site(cfg)
            base, why = _base_image(r, spec, offline)
            pf, af, _, _ = write_var_files(r, name, out_dir, base_image=base)
            rows.append(
                PlanRow(
                    stack=r.name,
                    digest=r.short_digest,
                    cloud=name,
                    build_location=location,
                    build_machine=machine,
                    validation_shapes=list(cfg.validation_shapes),
                    target_regions=list(cfg.regions),
                    packer_var_file=str(pf),
                    ansible_var_file=str(af),
                    base_image=base.to_dict() if base else None,
                    base_image_error=why,
                )
            )
    return rows


def rows_as_dicts(rows: list[PlanRow]) -> list[dict[str, object]]:
    return [asdict(r) for r in rows]
