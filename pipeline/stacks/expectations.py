"""Expectations from a stack file, on the controller (``imagectl validate --stack``, the
snapshot library): the stack is resolved here, never on a GPU host, whose validator reads
the image's own expect.json."""

from __future__ import annotations

from pathlib import Path

from imagectl.errors import UserError
from imagectl.stacks import load_resolved
from imagectl.validators.expectations import Expectations, shape_fields


def from_stack(images_dir: Path, stack_name: str, shape: str | None) -> Expectations:
    loaded, resolved = load_resolved(images_dir, stack_name)
    stack = resolved.stack
    clouds = stack.clouds.enabled()
    if shape is None:
        shapes = sorted({s for c in clouds.values() for s in c.validation_shapes})
        if len(shapes) != 1:
            raise UserError(
                f"stack '{stack_name}' has several validation shapes ({', '.join(shapes)})",
                where=str(loaded.path),
                hint="Pass --shape with the shape of this host",
            )
        shape = shapes[0]
    fields = shape_fields(images_dir, shape)
    cloud = fields.get("cloud")
    kernel = clouds[cloud].kernel if cloud in clouds else None
    pins = resolved.pins()
    packages: dict[str, str] = {}
    if cloud == "local" and stack.clouds.local is not None:
        packages.update(stack.clouds.local.packages)
    if pins["nccl"]:
        packages["libnccl2"] = pins["nccl"]
    if resolved.fabric_manager:
        packages[f"nvidia-fabricmanager-{resolved.driver_branch}"] = resolved.fabric_manager
    if resolved.dcgm_package and pins["dcgm"]:
        packages[resolved.dcgm_package] = pins["dcgm"]
    if pins["container_toolkit"]:
        packages["nvidia-container-toolkit"] = pins["container_toolkit"]
    if resolved.cuda_package and pins["cuda"]:
        packages[resolved.cuda_package] = pins["cuda"]
    return Expectations(
        origin=f"stack:{stack_name}",
        stack=stack.name,
        stack_digest=resolved.digest,
        driver=pins["driver"],
        cuda=pins["cuda"],
        nccl=pins["nccl"],
        fabric_manager=pins["fabric_manager"],
        kernel_modules=pins["kernel_modules"],
        kernel=kernel,
        dcgm=pins["dcgm"],
        container_toolkit=pins["container_toolkit"],
        validator_toolkit=pins["validator_toolkit"],
        profile=stack.validation.profile,
        packages=packages,
        held=sorted(packages),
        **fields,
    )
