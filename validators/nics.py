"""What a shape's GPU fabric is (images/catalog/shapes.yaml ``nics``): the kind of NIC the
GPUs use, how many, their rate, GPUDirect, and which NIC is each GPU's nearest.

Every GPU shape carries a ``nics`` block (``fabric: none`` where its GPUs use no NIC);
``REQUIRED`` names the fields each kind of fabric must have, and ``missing`` says which a
block lacks, so a check that needs a fact the shape does not give reports "inconclusive"
with the field named instead of passing. Loaded only from the shape table or an
expect.json: the validator's own side, no controller code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Fabric = Literal["efa", "infiniband", "roce", "gvnic", "none"]
GpuDirect = Literal["rdma", "tcpx", "tcpxo", "none"]

# The fields each fabric needs before the checks that read them can judge (the catalog test
# fails on a shape without one; a check that needs one a shape lacks says so).
REQUIRED: dict[str, tuple[str, ...]] = {
    "none": ("fabric", "source"),
    "efa": ("fabric", "count", "rate_gbps", "gpudirect", "nics_per_gpu", "pairing", "source"),
    "roce": ("fabric", "count", "rate_gbps", "gpudirect", "nics_per_gpu", "pairing", "source"),
    "gvnic": (
        "fabric",
        "count",
        "rate_gbps",
        "gpudirect",
        "nics_per_gpu",
        "pairing",
        "host_nics",
        "source",
    ),
    "infiniband": (
        "fabric",
        "count",
        "rate_gbps",
        "gpudirect",
        "nics_per_gpu",
        "pairing",
        "width",
        "speed",
        "source",
    ),
}


class Nics(BaseModel):
    """The shape's GPU fabric NICs (images/catalog/shapes.yaml ``nics``)."""

    model_config = ConfigDict(extra="forbid")

    fabric: Fabric
    count: int = Field(default=0, ge=0, description="GPU NICs of this fabric the shape has")
    rate_gbps: float | None = Field(default=None, description="each NIC's line rate, Gb/s")
    gpudirect: GpuDirect | None = Field(
        default=None,
        description="rdma (GPUDirect RDMA) | tcpx | tcpxo (GPUDirect-TCPX/O over gVNIC) | none; "
        "null: not described",
    )
    nics_per_gpu: int = Field(
        default=1, ge=0, description="at least this many NICs are each GPU's nearest"
    )
    pairing: Literal["pci_switch", "documented"] | None = Field(
        default=None,
        description="pci_switch: a GPU and its NICs share a PCIe switch the guest shows; "
        "documented: the guest shows none, gpu_nic_pairs gives the vendor's pairing",
    )
    host_nics: int = Field(
        default=0,
        ge=0,
        description="NICs beside them that carry no GPU traffic (the primary gVNIC on gVNIC "
        "shapes, counted with the GPU NICs)",
    )
    gpudirect_rdma: bool = False
    width: str | None = Field(default=None, description="InfiniBand port width, e.g. 4X")
    speed: str | None = Field(default=None, description="InfiniBand port speed, e.g. NDR")
    gpu_nic_pairs: dict[str, str | list[str]] = Field(
        default_factory=dict,
        description="GPU PCI address -> its nearest NIC's (or NICs'), where the vendor's "
        "topology file documents them (a guest that hides the PCIe switches)",
    )
    source: str = ""

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if "gpudirect" in data and "gpudirect_rdma" not in data:
            out["gpudirect_rdma"] = data["gpudirect"] == "rdma"
        if "gpudirect" not in data and "gpudirect_rdma" in data and data["gpudirect_rdma"]:
            out["gpudirect"] = "rdma"  # an older block: GPUDirect RDMA was its only kind
        return out

    def pairs(self) -> dict[str, list[str]]:
        """GPU address -> its documented nearest NIC address(es)."""
        return {g: ([n] if isinstance(n, str) else list(n)) for g, n in self.gpu_nic_pairs.items()}

    def missing(self, *fields: str) -> list[str]:
        """Of ``fields`` (default: every field the fabric requires), those the block lacks."""
        want = fields or REQUIRED.get(self.fabric, ())
        out = []
        for name in want:
            value = getattr(self, name, None)
            # a defaulted number counts only where the block wrote it (an expect.json from
            # an older catalog lacks host_nics: unknown, not 0)
            if value in (None, "") or (
                name in ("count", "nics_per_gpu", "host_nics") and name not in self.model_fields_set
            ):
                out.append(name)
        if "pairing" in want and self.pairing == "documented" and not self.gpu_nic_pairs:
            out.append("gpu_nic_pairs")
        return out


def missing_in_row(row: dict[str, object]) -> list[str]:
    """The ``nics`` fields a shape row lacks (``nics`` itself when it has no block)."""
    nics = row.get("nics")
    if not isinstance(nics, dict):
        return ["nics"]
    fabric = nics.get("fabric")
    if fabric not in REQUIRED:
        return ["nics.fabric"]
    out = [f"nics.{f}" for f in REQUIRED[fabric] if nics.get(f) in (None, "")]
    if nics.get("pairing") == "documented" and not nics.get("gpu_nic_pairs"):
        out.append("nics.gpu_nic_pairs")
    return out
