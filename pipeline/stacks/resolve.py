"""Derived pins and the stack digest.

Everything here is computed from the stack file, never typed twice: the driver branch,
the fabric manager version (== driver, only for NVSwitch GPUs), nvidia-imex, NVIDIA's
Debian packages of each pinned component at its pin (names from
images/compat/packages.yaml: what the roles install and hold and what expect.json checks),
and the digest that identifies the pin set everywhere later (tags, receipts, catalog).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from imagectl.compat.data import CompatData, PackageSet
from imagectl.compat.engine import Combination
from imagectl.core.versions import Dotted
from imagectl.stacks.schema import Stack


@dataclass(frozen=True)
class PinnedPackages:
    """One component's NVIDIA packages at the stack's pin."""

    component: str  # images/compat/packages.yaml: driver, nccl, ...
    var: str  # the Ansible role variable that receives ``names``
    names: tuple[str, ...]
    pin: str  # as the stack writes it (packages.yaml's ``version`` says how it matches)


@dataclass(frozen=True)
class Pins:
    """The flat view of what the image must contain (tags, Packer and Ansible variables,
    expectations, drift). ``to_dict`` is the JSON edge."""

    stack: str
    stack_digest: str
    distro: str  # <distro>-<release>, e.g. ubuntu-22.04
    driver: str | None
    driver_branch: int | None
    kernel_modules: Literal["open", "proprietary"] | None
    fabric_manager: str | None  # == driver where the GPUs need it
    imex: bool
    cuda: str | None
    nccl: str | None
    dcgm: str | None
    container_toolkit: str | None
    validator_toolkit: dict[str, str] | None  # torch, cuda (X.Y), variant (cuXY)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ResolvedStack:
    stack: Stack
    driver_branch: int | None
    fabric_manager: str | None
    imex: bool
    digest: str
    packages: tuple[PinnedPackages, ...] = ()

    def package_set(self, component: str) -> PinnedPackages | None:
        return next((p for p in self.packages if p.component == component), None)

    @property
    def cuda_package(self) -> str | None:
        """The CUDA toolkit's meta package, e.g. cuda-toolkit-12-8."""
        p = self.package_set("cuda_toolkit")
        return p.names[0] if p else None

    @property
    def dcgm_package(self) -> str | None:
        """DCGM's package for the toolkit's CUDA major, e.g. datacenter-gpu-manager-4-cuda12."""
        p = self.package_set("dcgm")
        return p.names[0] if p else None

    def pinned_packages(self) -> dict[str, str]:
        """Every NVIDIA package the image must carry -> the stack's pin for it."""
        return {name: p.pin for p in self.packages for name in p.names}

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def name(self) -> str:
        return self.stack.name

    def pins(self) -> Pins:
        """The flat view of what the image must contain (receipts, manifests, tags)."""
        n = self.stack.nvidia
        return Pins(
            stack=self.stack.name,
            stack_digest=self.digest,
            distro=f"{self.stack.os.distro}-{self.stack.os.release}",
            driver=n.driver.version if n else None,
            driver_branch=self.driver_branch,
            kernel_modules=n.driver.kernel_modules if n else None,
            fabric_manager=self.fabric_manager,
            imex=self.imex,
            cuda=n.cuda if n else None,
            nccl=n.nccl if n else None,
            dcgm=n.dcgm if n else None,
            container_toolkit=n.container_toolkit if n else None,
            validator_toolkit=self.validator_toolkit,
        )

    @property
    def validator_toolkit(self) -> dict[str, str] | None:
        """The pinned torch and CUDA variant of the validator, e.g. 2.9.1 + cu128."""
        tk = self.stack.validation.toolkit
        if tk is None:
            return None
        major, minor = tk.cuda.split(".")
        return {"torch": tk.torch, "cuda": tk.cuda, "variant": f"cu{major}{minor}"}

    def combination(self, as_of: dt.date | None = None) -> Combination:
        """The pins the compatibility rules judge (``as_of``: the day they are judged on;
        today when None)."""
        n = self.stack.nvidia
        assert n is not None
        return Combination(
            driver=n.driver.version,
            cuda=n.cuda,
            nccl=n.nccl,
            fabric_manager=self.fabric_manager,
            fabric_manager_mode=n.fabric_manager,
            gpus=tuple(self.stack.gpus),
            kernel_modules=n.driver.kernel_modules,
            toolkit_torch=tk.torch if (tk := self.stack.validation.toolkit) else None,
            toolkit_cuda=tk.cuda if tk else None,
            profile=self.stack.validation.profile,
            azure_security_type=next(
                (t for c in self.stack.clouds.enabled().values() if (t := c.security_type)),
                None,
            ),
            as_of=as_of or dt.date.today(),
        )


def stack_digest(stack: Stack) -> str:
    """sha256 over the canonical JSON of every pin (the description and the example flag
    are not pins; validation.nodes and validation.watcher only when not their defaults)."""
    body = stack.model_dump(mode="json", exclude={"description", "example"})
    if body.get("validation", {}).get("nodes") == 1:  # the default: digests made before it
        del body["validation"]["nodes"]
    if body.get("validation", {}).get("watcher") is False:  # likewise
        del body["validation"]["watcher"]
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def resolve(stack: Stack, data: CompatData) -> ResolvedStack:
    n = stack.nvidia
    if n is None:
        return ResolvedStack(stack, None, None, False, stack_digest(stack))
    gpus = [data.gpu(g) for g in stack.gpus]
    nvswitch = any(g.nvswitch for g in gpus)
    wants_fm = n.fabric_manager == "required" or (n.fabric_manager == "auto" and nvswitch)
    cuda = Dotted.parse(n.cuda)
    fabric_manager = n.driver.version if wants_fm else None
    imex = any(g.imex for g in gpus)
    pins = {
        "driver": n.driver.version,
        "fabric_manager": fabric_manager,
        "imex": fabric_manager if imex else None,
        "cuda_toolkit": n.cuda,
        "nccl": n.nccl,
        "dcgm": n.dcgm,
        "container_toolkit": n.container_toolkit,
    }
    fields = {
        "branch": n.driver.branch,
        "flavour": "-open" if n.driver.kernel_modules == "open" else "",
        "cuda_major": cuda.major,
        "cuda_minor": cuda.minor,
    }
    return ResolvedStack(
        stack=stack,
        driver_branch=n.driver.branch,
        fabric_manager=fabric_manager,
        imex=imex,
        digest=stack_digest(stack),
        packages=tuple(
            _pinned(data.package_sets[c], pin, fields) for c, pin in pins.items() if pin
        ),
    )


def _pinned(spec: PackageSet, pin: str, fields: Mapping[str, object]) -> PinnedPackages:
    return PinnedPackages(
        component=spec.component,
        var=spec.var,
        names=tuple(t.format(**fields) for t in spec.packages),
        pin=pin,
    )
