"""Expectations, built once from the resolved stack, on the controller.

``image_expectations`` is the one producer of what an image must contain: it goes into
the stack's Ansible vars file at plan time (``validator_expect``), the validator role
writes it unchanged as the image's ``/etc/imagectl/expect.json`` (the boot unit's
``--expect``), and every validation run on the controller adds the machine shape to the
same object (``for_shape``) and ships it to the host as ``--expect``. A GPU host never
resolves a stack.

``for_build`` is what a build records beside its manifest in the catalog
(``builds.expectations``, with the stack digest they came from in
``builds.expectations_digest``): the image's expectations on each validation shape of its
cloud. ``imagectl validate-image`` judges the image by that record
(``BuildExpectations.from_columns``), so a stack edited after the build does not change
how an existing image is judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from imagectl.core.errors import UserError
from imagectl.stacks import load_resolved
from imagectl.stacks.loader import LoadedStack
from imagectl.stacks.resolve import ResolvedStack
from imagectl.stacks.sections import sections
from imagectl.validators.expectations import Expectations, Network, shape_fields


def network_for(resolved: ResolvedStack, cloud: str | None) -> Network:
    """The stack's fabric pins that apply on ``cloud``: the fabrics its stack section
    installs (``stacks.sections.CloudSection.fabrics``); an image for no cloud expects
    every fabric."""
    pins = resolved.stack.network.model_dump(mode="json")
    section = sections().get(cloud) if cloud is not None else None
    installed = section.fabrics if section is not None else frozenset()
    return Network.model_validate(
        {k: v for k, v in pins.items() if v is not None and (cloud is None or k in installed)}
    )


def image_expectations(
    resolved: ResolvedStack,
    cloud: str | None,
    *,
    shape: Mapping[str, object] | None = None,
    origin: str | None = None,
) -> Expectations:
    """What the stack's image for ``cloud`` must contain: without ``shape``, on no machine
    shape yet (the image's ``expect.json``); with it (``shape_fields``: the shape's GPUs,
    hardware and cloud), on that shape, made in one step (the driver version's one hop
    from the pins into expectations, docs/architecture.md).

    ``packages``: every NVIDIA package the roles install (images/compat/packages.yaml) at
    the stack's pin, plus the stack's own packages (``clouds.local.packages``); ``held``:
    those and the pinned kernel's image, as the roles hold them.
    """
    stack = resolved.stack
    pins = resolved.pins()
    clouds = stack.clouds.enabled()
    c = clouds.get(cloud) if cloud else None
    kernel = c.kernel if c is not None else None
    packages = c.extra_packages if c is not None else {}
    packages.update(resolved.pinned_packages())
    held = sorted({*packages, *([f"linux-image-{kernel}"] if kernel else [])})
    pinned: dict[str, object] = {
        "origin": origin or f"image:{stack.name}",
        "stack": stack.name,
        "stack_digest": resolved.digest,
        "cloud": cloud,
        "gpus_expected": stack.nvidia is not None,
        "driver": pins.driver,
        "cuda": pins.cuda,
        "nccl": pins.nccl,
        "fabric_manager": pins.fabric_manager,
        "kernel_modules": pins.kernel_modules,
        "kernel": kernel,
        "dcgm": pins.dcgm,
        "container_toolkit": pins.container_toolkit,
        "validator_toolkit": pins.validator_toolkit,
        "profile": stack.validation.profile,
        "packages": packages,
        "held": held,
        "network": network_for(resolved, cloud),
    }
    return Expectations.model_validate({**pinned, **(shape or {})})


def shape_of(loaded: LoadedStack, resolved: ResolvedStack, shape: str | None) -> str:
    """``shape``, or the stack's only validation shape; several -> exit 2 asking for one."""
    if shape is not None:
        return shape
    clouds = resolved.stack.clouds.enabled()
    shapes = sorted({s for c in clouds.values() for s in c.validation_shapes})
    if len(shapes) != 1:
        raise UserError(
            f"stack '{resolved.stack.name}' has several validation shapes ({', '.join(shapes)})",
            where=str(loaded.path),
            hint="Pass --shape with the shape of this host",
        )
    return shapes[0]


def for_shape(
    images_dir: Path, resolved: ResolvedStack, shape: str, *, image_id: str | None = None
) -> Expectations:
    """The image's expectations on one machine shape (its GPUs, hardware and cloud)."""
    fields = shape_fields(images_dir, shape)
    return image_expectations(
        resolved,
        _cloud_of(fields),
        shape={**fields, **({"image_id": image_id} if image_id else {})},
        origin=f"stack:{resolved.stack.name}",
    )


def _cloud_of(fields: Mapping[str, object]) -> str | None:
    cloud = fields.get("cloud")
    return str(cloud) if cloud else None


def from_stack(images_dir: Path, stack_name: str, shape: str | None) -> Expectations:
    """``imagectl validate --stack S [--shape SHAPE]`` on the controller."""
    loaded, resolved = load_resolved(images_dir, stack_name)
    return for_shape(images_dir, resolved, shape_of(loaded, resolved, shape))


class BuildExpectations(BaseModel):
    """What a build recorded about its image: the expectations on each validation shape of
    its cloud, and the stack digest they were resolved from (the image's own)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stack_digest: str
    shapes: dict[str, Expectations]

    @property
    def profile(self) -> str | None:
        """The stack's validation.profile as the build recorded it (the same on every
        shape)."""
        return next((e.profile for e in self.shapes.values()), None)

    def columns(self) -> tuple[str, dict[str, object]]:
        """(``builds.expectations_digest``, ``builds.expectations``): the catalog's JSON."""
        return self.stack_digest, {
            shape: e.model_dump(mode="json") for shape, e in self.shapes.items()
        }

    @classmethod
    def from_columns(
        cls, digest: str | None, shapes: Mapping[str, object] | None, *, where: str
    ) -> BuildExpectations | None:
        """The record from the catalog's columns; None for a build recorded before builds
        recorded expectations. A record that does not parse (edited by hand, a foreign
        writer) is bad input naming the build (exit 2)."""
        if digest is None and shapes is None:
            return None
        try:
            return cls.model_validate({"stack_digest": digest, "shapes": dict(shapes or {})})
        except ValidationError as exc:
            first = exc.errors()[0]
            at = ".".join(str(p) for p in first["loc"])
            raise UserError(
                f"the expectations this build recorded are not valid ({at}: {first['msg']})",
                where=where,
                hint="Build a new candidate: its build records them again",
            ) from None


def for_build(
    images_dir: Path, resolved: ResolvedStack, shapes: Iterable[str], *, build_id: str
) -> BuildExpectations:
    """What a build of ``resolved`` records: the image's expectations on each of ``shapes``
    (its cloud's validation shapes), resolved once, now (each made in one step by
    ``image_expectations``, kept as it is)."""
    made = {}
    for shape in shapes:
        fields = shape_fields(images_dir, shape)
        made[shape] = image_expectations(
            resolved, _cloud_of(fields), shape=fields, origin=f"build:{build_id}"
        )
    return BuildExpectations(stack_digest=resolved.digest, shapes=made)
