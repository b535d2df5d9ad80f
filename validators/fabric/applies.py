"""Whether a fabric check applies here: the shape has that fabric's NICs, the image pins its
software, and the fabric was read (a replayed snapshot may predate the section)."""

from __future__ import annotations

from typing import Literal

from imagectl.validators.context import Context
from imagectl.validators.expectations import Nics
from imagectl.validators.fabric.model import FabricSection
from imagectl.validators.findings import Finding, skip

Fabric = Literal["efa", "infiniband"]
LABEL = {"efa": "EFA", "infiniband": "InfiniBand"}
PIN = {"efa": "network.aws_efa", "infiniband": "network.azure_infiniband"}
SHAPES = "images/catalog/shapes.yaml"


def shape_nics(ctx: Context) -> Nics | None:
    hw = ctx.expect.hardware
    return hw.nics if hw is not None else None


def pinned(ctx: Context, fabric: Fabric) -> bool:
    net = ctx.expect.network
    return (net.aws_efa if fabric == "efa" else net.azure_infiniband) is not None


def not_applicable(ctx: Context, fabric: Fabric | None = None) -> Finding | None:
    """A skip saying why the check does not apply (``fabric`` None: the shape's own)."""
    if ctx.expect.hardware is None:
        return skip("no shape given: which fabric the host has is unknown (pass --shape)")
    nics = shape_nics(ctx)
    want = fabric or (nics.fabric if nics is not None else None)
    if nics is None or want is None or nics.fabric != want:
        what = LABEL[want] if want else "GPU fabric NICs"
        return skip(f"shape {ctx.expect.shape or '?'} has no {what} ({SHAPES})")
    if not pinned(ctx, want):
        return skip(f"the image installs no {LABEL[want]} software ({PIN[want]} not pinned)")
    if ctx.fabric() is None:
        return skip("the snapshot has no fabric section (captured before it was recorded)")
    return None


def section(ctx: Context) -> FabricSection:
    """The fabric section, after ``not_applicable`` returned None."""
    read = ctx.fabric()
    assert read is not None
    return read
