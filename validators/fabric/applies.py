"""Whether a fabric check applies here: the shape has that fabric's NICs, the image pins its
software (for the checks that judge the software), and the fabric was read (a replayed
snapshot may predate the section). A shape whose NIC facts are missing, or a snapshot part
an older capture did not record, is *inconclusive*: a skip that names what is missing,
never a pass."""

from __future__ import annotations

from typing import Any, Literal

from imagectl.validators.context import Context
from imagectl.validators.expectations import Network
from imagectl.validators.fabric.model import FabricSection
from imagectl.validators.findings import Finding, skip
from imagectl.validators.nics import Nics

Fabric = Literal["efa", "infiniband", "roce", "gvnic"]
LABEL = {
    "efa": "EFA",
    "infiniband": "InfiniBand",
    "roce": "RDMA (RoCE) NICs",
    "gvnic": "gVNIC GPU NICs",
}
SHAPES = "images/catalog/shapes.yaml"


def shape_nics(ctx: Context) -> Nics | None:
    hw = ctx.expect.hardware
    return hw.nics if hw is not None else None


def pinned(ctx: Context, fabric: str) -> bool:
    """The image pins ``fabric``'s software (expect.json's ``network.<fabric>``)."""
    return ctx.expect.network.pins(fabric) is not None


def inconclusive(
    message: str, missing: list[str], details: dict[str, Any] | None = None
) -> Finding:
    """A check that needs a fact it does not have: a skip marked inconclusive, naming it."""
    return skip(
        f"inconclusive: {message}",
        details={**(details or {}), "inconclusive": True, "missing": missing},
    )


def missing_facts(ctx: Context, *fields: str) -> Finding | None:
    """Inconclusive when the shape's ``nics`` block lacks one of ``fields``."""
    nics = shape_nics(ctx)
    if nics is None:
        return None
    gone = nics.missing(*fields)
    if not gone:
        return None
    shape = ctx.expect.shape or "?"
    names = [f"{SHAPES} {shape}: nics.{f}" for f in gone]
    return inconclusive(
        f"shape {shape} does not give {', '.join('nics.' + f for f in gone)} (add it to "
        f"{SHAPES} with its source)",
        names,
    )


def not_applicable(
    ctx: Context, fabric: str | None = None, *, needs_software: bool = True
) -> Finding | None:
    """A skip saying why the check does not apply (``fabric`` None: the shape's own).
    ``needs_software`` False: a check of the hardware (NIC count, PCIe, ACS, counters),
    judged whether or not the image pins the fabric's software."""
    if ctx.expect.hardware is None:
        return skip("no shape given: which fabric the host has is unknown (pass --shape)")
    nics = shape_nics(ctx)
    shape = ctx.expect.shape or "?"
    if nics is None and ctx.expect.shape is None:
        return inconclusive(
            "no shape given (a host described by its GPUs alone): its fabric NICs are "
            f"unknown; pass --shape (one of {SHAPES})",
            ["--shape"],
        )
    if nics is None:
        return inconclusive(
            f"the expectations describe no NICs for shape {shape} (hardware.nics is null: an "
            f"expect.json from before {SHAPES} described every shape's NICs, or a host given "
            "by --gpu); pass --shape",
            ["hardware.nics"],
        )
    if nics.fabric == "none" and fabric is None:
        return skip(f"shape {shape}'s GPUs use no fabric NIC ({nics.source})")
    want = fabric or nics.fabric
    if nics.fabric != want:
        return skip(f"shape {shape} has no {LABEL.get(want, want)} ({SHAPES})")
    if needs_software and not pinned(ctx, want):
        if want in Network.model_fields:
            return skip(f"the image installs no {LABEL[want]} software (network.{want} not pinned)")
        return skip(
            f"the image's software for {LABEL.get(want, want)} is not pinned by the stack "
            "(no network pin exists for it): NCCL's use of it is not judged"
        )
    if ctx.fabric() is None:
        return skip("the snapshot has no fabric section (captured before it was recorded)")
    return None


def section(ctx: Context) -> FabricSection:
    """The fabric section, after ``not_applicable`` returned None."""
    read = ctx.fabric()
    assert read is not None
    return read
