"""Load the compatibility data files under images/compat/ (rules, CUDA, GPUs, branches)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.core.gpu_names import GpuNames, build_names
from imagectl.core.versions import Dotted
from imagectl.core.yamlfast import load_data


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    field: str
    message: str
    fix: str
    source: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Arch:
    name: str
    kernel_modules: tuple[str, ...]
    last_cuda_major: int | None
    source: str


@dataclass(frozen=True)
class Gpu:
    sku: str
    arch: Arch
    memory_gib: int
    nvswitch: bool
    imex: bool
    min_branch: int | None
    nvml_names: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Branch:
    number: int
    designation: str
    end_of_life: dt.date


@dataclass(frozen=True)
class ToolkitVariant:
    """One CUDA variant of a torch release (images/compat/toolkits.yaml)."""

    torch: str
    variant: str  # cu128
    cuda_runtime: str  # the CUDA runtime its wheels bundle
    pypi_default: bool
    source: str


@dataclass(frozen=True)
class PackageSet:
    """NVIDIA's Debian packages of one stack component (images/compat/packages.yaml)."""

    component: str
    var: str  # the Ansible role variable that receives the names
    version: str  # "upstream" (NVIDIA adds the Debian revision) or "exact"
    packages: tuple[str, ...]  # name templates: {branch} {flavour} {cuda_major} {cuda_minor}
    source: str


@dataclass(frozen=True)
class CompatData:
    rules: dict[str, Rule]
    cuda_min_driver: dict[str, Dotted]  # normalised "12.8.1" -> min driver
    cuda_source: str
    gpus: dict[str, Gpu]
    branches: dict[int, Branch]
    branch_warn_days: int
    branches_source: str
    toolkits: dict[str, dict[str, ToolkitVariant]] = field(default_factory=dict)
    toolkit_index: str = ""
    toolkits_source: str = ""
    package_sets: dict[str, PackageSet] = field(default_factory=dict)
    gpu_names: GpuNames = field(default_factory=GpuNames)

    def toolkit(self, torch: str, variant: str) -> ToolkitVariant | None:
        return self.toolkits.get(torch, {}).get(variant)

    def cuda_entry(self, cuda: str) -> tuple[str, Dotted]:
        """Resolve '12.8' (GA) or '12.8.1' to its table entry; unknown -> exit 2."""
        key = normalise_cuda(cuda)
        if key not in self.cuda_min_driver:
            raise UserError(
                f"unknown CUDA toolkit version '{cuda}'",
                hint="Known versions: " + ", ".join(self.cuda_min_driver),
            )
        return key, self.cuda_min_driver[key]

    def gpu(self, sku: str) -> Gpu:
        """The one SKU ``sku`` names (a SKU key, an nvidia-smi name, a product name of
        gpu_names.yaml); a family name or an unknown name is exit 2 with the choices."""
        if sku in self.gpus:
            return self.gpus[sku]
        members = self.gpus_named(sku)
        if len(members) > 1:
            raise UserError(
                f"GPU '{sku}' names several GPUs: {', '.join(g.sku for g in members)}",
                hint="Name one SKU (a stack pins one; `compat check --gpu` judges a family)",
            )
        return members[0]

    def gpus_named(self, name: str) -> list[Gpu]:
        """Every SKU ``name`` stands for (one, or a family's); unknown -> exit 2 with a
        "did you mean" of the closest known names."""
        if name in self.gpus:
            return [self.gpus[name]]
        skus = self.gpu_names.lookup(name)
        if skus:
            return [self.gpus[s] for s in skus]
        close = self.gpu_names.suggest(name)
        mean = f"Did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise UserError(
            f"unknown GPU '{name}'",
            hint=f"{mean}Known GPUs: "
            + ", ".join(sorted(self.gpus))
            + " (or their nvidia-smi names, images/compat/gpus.yaml nvml_names, and the "
            "product names of images/compat/gpu_names.yaml)",
        )


def normalise_cuda(cuda: str) -> str:
    parts = Dotted.parse(cuda, what="CUDA version").parts
    return ".".join(str(p) for p in (*parts, 0, 0)[:3])


@lru_cache(maxsize=8)
def load_compat(compat_dir: Path) -> CompatData:
    rules_doc = load_data(compat_dir / "rules.yaml")
    rules = {
        rid: Rule(
            id=rid,
            severity=r["severity"],
            field=r["field"],
            message=r["message"],
            fix=r["fix"],
            source=r["source"],
            params=dict(r.get("params") or {}),
        )
        for rid, r in rules_doc["rules"].items()
    }
    cuda_doc = load_data(compat_dir / "cuda.yaml")
    cuda = {
        normalise_cuda(str(t["cuda"])): Dotted.parse(str(t["min_driver"]))
        for t in cuda_doc["toolkits"]
    }
    gpu_doc = load_data(compat_dir / "gpus.yaml")
    archs = {
        name: Arch(
            name=name,
            kernel_modules=tuple(a["kernel_modules"]),
            last_cuda_major=a.get("last_cuda_major"),
            source=a["source"],
        )
        for name, a in gpu_doc["architectures"].items()
    }
    gpus = {
        sku: Gpu(
            sku=sku,
            arch=archs[g["arch"]],
            memory_gib=int(g["memory_gib"]),
            nvswitch=bool(g["nvswitch"]),
            imex=bool(g.get("imex", False)),
            min_branch=g.get("min_branch"),
            nvml_names=tuple(g.get("nvml_names", ())),
            source=g["source"],
        )
        for sku, g in gpu_doc["gpus"].items()
    }
    names_file = compat_dir / "gpu_names.yaml"
    names_doc = load_data(names_file) if names_file.is_file() else {}
    try:
        gpu_names = build_names(
            {sku: g.nvml_names for sku, g in gpus.items()}, names_doc.get("names")
        )
    except ValueError as error:
        raise UserError(str(error), where=str(names_file)) from None
    br_doc = load_data(compat_dir / "branches.yaml")
    branches = {
        int(n): Branch(
            number=int(n),
            designation=b["designation"],
            end_of_life=_date(b["end_of_life"]),
        )
        for n, b in br_doc["branches"].items()
    }
    tk_doc = load_data(compat_dir / "toolkits.yaml")
    toolkits = {
        str(version): {
            str(name): ToolkitVariant(
                torch=str(version),
                variant=str(name),
                cuda_runtime=str(v["cuda_runtime"]),
                pypi_default=bool(v.get("pypi_default", False)),
                source=str(v["source"]),
            )
            for name, v in t["variants"].items()
        }
        for version, t in tk_doc["torch"].items()
    }
    pkg_doc = load_data(compat_dir / "packages.yaml")
    package_sets = {
        str(name): PackageSet(
            component=str(name),
            var=str(c["var"]),
            version=str(c["version"]),
            packages=tuple(str(x) for x in c["packages"]),
            source=str(c["source"]),
        )
        for name, c in pkg_doc["components"].items()
    }
    return CompatData(
        rules=rules,
        cuda_min_driver=cuda,
        cuda_source=cuda_doc["source"],
        gpus=gpus,
        branches=branches,
        branch_warn_days=int(br_doc.get("warn_days", 90)),
        branches_source=br_doc["source"],
        toolkits=toolkits,
        toolkit_index=str(tk_doc["index"]),
        toolkits_source=str(tk_doc["source"]),
        package_sets=package_sets,
        gpu_names=gpu_names,
    )


def _date(value: object) -> dt.date:
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))
