"""The build matrix (stack x cloud x build location x validation shapes x target regions)
and the resolved variable files the build would use."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from imagectl.clouds.registry import cloud_spec
from imagectl.compat.data import load_compat
from imagectl.errors import UserError
from imagectl.packer.variables import write_var_files
from imagectl.paths import Workspace
from imagectl.stacks.loader import find_stack, load_stack, stack_paths
from imagectl.stacks.resolve import resolve


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


def build_plan(ws: Workspace, stack: str | None, cloud: str | None, out_dir: Path) -> list[PlanRow]:
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
            location, machine = cloud_spec(name).build_site(cfg)
            pf, af, _, _ = write_var_files(r, name, out_dir)
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
                )
            )
    return rows


def rows_as_dicts(rows: list[PlanRow]) -> list[dict[str, object]]:
    return [asdict(r) for r in rows]
