"""Derived pins and the stack digest.

Everything here is computed from the stack file, never typed twice: the driver branch,
the fabric manager version (== driver, only for NVSwitch GPUs), nvidia-imex, the DCGM
package for the toolkit's CUDA major, the CUDA toolkit package, and the digest that
identifies the pin set everywhere later (tags, receipts, catalog).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from imagectl.compat.data import CompatData
from imagectl.compat.engine import Combination
from imagectl.stacks.schema import Stack
from imagectl.versions import Dotted, NcclVersion


@dataclass(frozen=True)
class ResolvedStack:
    stack: Stack
    driver_branch: int | None
    fabric_manager: str | None
    imex: bool
    cuda_package: str | None
    dcgm_package: str | None
    digest: str

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def name(self) -> str:
        return self.stack.name

    def pins(self) -> dict[str, Any]:
        """The flat view of what the image must contain (receipts, manifests, tags)."""
        n = self.stack.nvidia
        return {
            "stack": self.stack.name,
            "stack_digest": self.digest,
            "distro": f"{self.stack.os.distro}-{self.stack.os.release}",
            "driver": n.driver.version if n else None,
            "driver_branch": self.driver_branch,
            "kernel_modules": n.driver.kernel_modules if n else None,
            "fabric_manager": self.fabric_manager,
            "imex": self.imex,
            "cuda": n.cuda if n else None,
            "nccl": n.nccl if n else None,
            "dcgm": n.dcgm if n else None,
            "container_toolkit": n.container_toolkit if n else None,
            "validator_toolkit": self.validator_toolkit,
        }

    @property
    def validator_toolkit(self) -> dict[str, str] | None:
        """The pinned torch and CUDA variant of the validator, e.g. 2.9.1 + cu128."""
        tk = self.stack.validation.toolkit
        if tk is None:
            return None
        major, minor = tk.cuda.split(".")
        return {"torch": tk.torch, "cuda": tk.cuda, "variant": f"cu{major}{minor}"}

    def combination(self, as_of: Any = None) -> Combination:
        n = self.stack.nvidia
        assert n is not None
        kwargs: dict[str, Any] = {}
        if as_of is not None:
            kwargs["as_of"] = as_of
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
            azure_security_type=az.gallery.security_type
            if (az := self.stack.clouds.azure)
            else None,
            **kwargs,
        )


def stack_digest(stack: Stack) -> str:
    """sha256 over the canonical JSON of every pin (the description is not a pin)."""
    body = stack.model_dump(mode="json", exclude={"description"})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def resolve(stack: Stack, data: CompatData) -> ResolvedStack:
    n = stack.nvidia
    if n is None:
        return ResolvedStack(stack, None, None, False, None, None, stack_digest(stack))
    gpus = [data.gpu(g) for g in stack.gpus]
    nvswitch = any(g.nvswitch for g in gpus)
    wants_fm = n.fabric_manager == "required" or (n.fabric_manager == "auto" and nvswitch)
    cuda = Dotted.parse(n.cuda)
    if n.nccl:
        NcclVersion.parse(n.nccl)
    return ResolvedStack(
        stack=stack,
        driver_branch=n.driver.branch,
        fabric_manager=n.driver.version if wants_fm else None,
        imex=any(g.imex for g in gpus),
        cuda_package=f"cuda-toolkit-{cuda.major}-{cuda.minor}",
        dcgm_package=f"datacenter-gpu-manager-4-cuda{cuda.major}" if n.dcgm else None,
        digest=stack_digest(stack),
    )
