"""``imagectl lint``: every stack against the schema, the compatibility rules, the shape
catalog, the variables the Packer templates and Ansible roles declare, each cloud's
region / zone / location names and documentation placeholder ids."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from imagectl.clouds.registry import cloud_spec
from imagectl.compat.data import load_compat
from imagectl.compat.engine import evaluate
from imagectl.core.errors import StackError, UserError
from imagectl.packer.templates import template_files
from imagectl.packer.variables import ansible_vars, packer_vars
from imagectl.paths import Workspace
from imagectl.stacks.findings import Finding
from imagectl.stacks.loader import LoadedStack, load_stack, stack_paths
from imagectl.stacks.placeholders import placeholder_findings
from imagectl.stacks.resolve import resolve
from imagectl.stacks.sections import section_findings
from imagectl.validators.shapes import load_shapes

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

_PACKER_VAR = re.compile(r'^\s*variable\s+"([A-Za-z0-9_-]+)"', re.MULTILINE)
_YAML_KEY = re.compile(r"^([a-z][a-z0-9_]*):", re.MULTILINE)


@dataclass(frozen=True)
class Problem:
    rule: str
    severity: str  # error | warning
    where: str  # file:line
    message: str
    fix: str = ""
    source: str = ""


@dataclass
class StackReport:
    stack: str
    path: str
    digest: str | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def as_dict(self) -> dict[str, object]:
        return {
            "stack": self.stack,
            "path": self.path,
            "digest": self.digest,
            "ok": self.ok,
            "problems": [asdict(p) for p in self.problems],
        }


def declared_packer_vars(folder: Path) -> set[str]:
    """Variables declared for a cloud: its own template files and images/common/'s."""
    names: set[str] = set()
    if not any(folder.glob("*.pkr.hcl")):
        return names  # reported as TEMPLATE-MISSING
    for f in template_files(folder):
        names.update(_PACKER_VAR.findall(f.read_text(encoding="utf-8")))
    return names


def declared_role_vars(playbooks: Path) -> set[str]:
    names: set[str] = set()
    for f in sorted(playbooks.glob("roles/*/defaults/main.y*ml")):
        names.update(_YAML_KEY.findall(f.read_text(encoding="utf-8")))
    return names


def lint_stack(ws: Workspace, path: Path, *, as_of: dt.date | None = None) -> StackReport:
    report = StackReport(stack=path.stem, path=ws.relative(path))
    try:
        loaded = load_stack(path)
    except StackError as exc:
        for text in exc.problems:
            where, _, message = text.partition(": ")
            report.problems.append(Problem("SCHEMA", "error", where, message))
        return report
    data = load_compat(ws.compat_dir)
    try:
        resolved = resolve(loaded.stack, data)
    except UserError as exc:
        report.problems.append(Problem("SCHEMA", "error", loaded.where("gpus"), exc.render()))
        return report
    report.digest = resolved.digest
    if loaded.stack.nvidia is not None:
        for v in evaluate(resolved.combination(as_of=as_of), data):
            loc = tuple(v.field.split("."))
            report.problems.append(
                Problem(v.rule, v.severity, _where(loaded, loc), v.message, v.fix, v.source)
            )
    report.problems.extend(_shape_problems(ws, loaded))
    report.problems.extend(_cloud_name_problems(ws, loaded))
    report.problems.extend(_variable_problems(ws, loaded, resolved))
    return report


def _where(loaded: LoadedStack, loc: tuple[str | int, ...]) -> str:
    path = Path(loaded.path)
    try:
        shown = path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        shown = path.as_posix()
    return f"{shown}:{loaded.line_of(*loc)}"


def _cloud_name_problems(ws: Workspace, loaded: LoadedStack) -> list[Problem]:
    """Each cloud's checks of its section (region/zone/location names the cloud does not
    have, what it refuses at launch); placeholder ids."""
    found: list[Finding] = [
        *section_findings(loaded.stack.clouds.enabled(), ws.compat_dir),
        *placeholder_findings(loaded.stack, ws.compat_dir),
    ]
    return [
        Problem(f.rule, f.severity, _where(loaded, f.loc), f.message, f.fix, f.source)
        for f in found
    ]


def _shape_problems(ws: Workspace, loaded: LoadedStack) -> list[Problem]:
    shapes = load_shapes(ws.catalog_dir)
    out = []
    stack = loaded.stack
    for cloud, cfg in stack.clouds.enabled().items():
        for i, name in enumerate(cfg.validation_shapes):
            where = _where(loaded, ("clouds", cloud, "validation_shapes", i))
            shape = shapes.get(name)
            if shape is None or shape.cloud != cloud:
                known = sorted(s for s, v in shapes.items() if v.cloud == cloud)
                out.append(
                    Problem(
                        "SHAPE-UNKNOWN",
                        "error",
                        where,
                        f"'{name}' is not a known {cloud} validation shape",
                        f"use one of {', '.join(known)} or add it to images/catalog/shapes.yaml",
                        "images/catalog/shapes.yaml",
                    )
                )
            elif shape.gpu is not None and shape.gpu not in stack.gpus:
                out.append(
                    Problem(
                        "SHAPE-GPU",
                        "error",
                        where,
                        f"shape '{name}' has {shape.gpu} GPUs, which the stack does not target "
                        f"(gpus: {', '.join(stack.gpus) or 'none'})",
                        f"add {shape.gpu} to gpus or pick a shape with one of the stack's GPUs",
                        shape.source,
                    )
                )
    return out


def _variable_problems(
    ws: Workspace, loaded: LoadedStack, resolved: ResolvedStack
) -> list[Problem]:
    out = []
    role_vars = declared_role_vars(ws.playbooks)
    for cloud in loaded.stack.clouds.enabled():
        where = _where(loaded, ("clouds", cloud))
        folder = cloud_spec(cloud).packer_dir(ws.images)
        declared = declared_packer_vars(folder)
        if not declared:
            out.append(
                Problem(
                    "TEMPLATE-MISSING",
                    "error",
                    where,
                    f"no Packer template declares variables for cloud '{cloud}' "
                    f"({ws.relative(folder)}/variables.pkr.hcl)",
                    "add the cloud's template set under images/",
                )
            )
        else:
            missing = sorted(set(packer_vars(resolved, cloud)) - declared)
            if missing:
                out.append(
                    Problem(
                        "TEMPLATE-VAR-MISSING",
                        "error",
                        where,
                        f"the stack feeds Packer variables that {ws.relative(folder)} does "
                        f"not declare: {', '.join(missing)}",
                        f"add a variable block for each to {ws.relative(folder)}/variables.pkr.hcl"
                        " (or to images/common/stack.pkr.hcl when every cloud is fed it)",
                    )
                )
        missing_roles = sorted(set(ansible_vars(resolved, cloud)) - role_vars)
        if missing_roles:
            out.append(
                Problem(
                    "ANSIBLE-VAR-MISSING",
                    "error",
                    where,
                    "the stack feeds Ansible variables that no role under "
                    f"{ws.relative(ws.playbooks)}/roles defines: {', '.join(missing_roles)}",
                    "define each in the owning role's defaults/main.yml",
                )
            )
    return out


def lint_workspace(
    ws: Workspace, names: list[str] | None = None, *, as_of: dt.date | None = None
) -> list[StackReport]:
    paths = stack_paths(ws.stacks_dir)
    if names:
        by_name = {p.stem: p for p in paths}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise UserError(
                f"no stack named {', '.join(unknown)} in {ws.relative(ws.stacks_dir)}",
                hint=f"Known stacks: {', '.join(sorted(by_name)) or 'none'}",
            )
        paths = [by_name[n] for n in names]
    if not paths:
        raise UserError(f"no stack files found in {ws.stacks_dir}", hint="Add images/stacks/*.yaml")
    return [lint_stack(ws, p, as_of=as_of) for p in paths]
