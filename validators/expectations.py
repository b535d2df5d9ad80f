"""What the host must be: the image's pins (its expect.json) plus the machine shape.

Read from ``--expect FILE`` (JSON built once on the controller from the resolved stack,
``imagectl.stacks.expectations``: written into the image at build time as
``/etc/imagectl/expect.json``, the default here, and shipped with the shape added by every
validation run; schema in ``schema/expect.schema.json``, generated from this model), or
from only ``--shape`` (hardware from ``images/catalog/shapes.yaml`` and GPU facts from
``images/compat/gpus.yaml``). On the controller, ``imagectl validate --stack S`` builds
the same object from the stack file. A field left ``None`` is not pinned: its check is
skipped with that reason, never passed silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from imagectl.core.errors import UserError
from imagectl.validators.jsonfile import read_json
from imagectl.validators.nics import Nics
from imagectl.validators.shapes import gpu_pcie, gpu_power, gpu_row, shape_rows

DEFAULT_EXPECT_FILE = Path("/etc/imagectl/expect.json")


class EfaPins(BaseModel):
    model_config = ConfigDict(extra="forbid")
    installer: str
    ofi_nccl: str


class InfinibandPins(BaseModel):
    model_config = ConfigDict(extra="forbid")
    doca_ofed: str
    peermem: bool = True


class Network(BaseModel):
    """The fabric software the image installs (the stack's ``network`` for its cloud),
    keyed by fabric (the ``nics.fabric`` of a shape). The expect.json of an image built
    before the keys were fabrics names them after a cloud (``aws_efa``,
    ``azure_infiniband``): those names are read too."""

    model_config = ConfigDict(extra="forbid")
    efa: EfaPins | None = Field(None, validation_alias=AliasChoices("efa", "aws_efa"))
    infiniband: InfinibandPins | None = Field(
        None, validation_alias=AliasChoices("infiniband", "azure_infiniband")
    )

    def pins(self, fabric: str) -> BaseModel | None:
        """The software pins of ``fabric`` (a shape's ``nics.fabric``), or None: a fabric
        with no network pin (RoCE, gVNIC) or one the image does not install."""
        found = getattr(self, fabric, None) if fabric in type(self).model_fields else None
        return found if isinstance(found, BaseModel) else None


class Hardware(BaseModel):
    """The per-shape hardware table (images/catalog/shapes.yaml + images/compat/gpus.yaml:
    names, memory, NVSwitch, the PCIe link and the power range come from the GPU table)."""

    model_config = ConfigDict(extra="forbid")

    nvml_names: list[str] = Field(default_factory=list, description="accepted nvmlDeviceGetName")
    arch: str | None = None
    memory_gib: float | None = None
    nvswitch: bool = False
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlink_links: int = 0
    power_limit_w: float | None = None
    power_limit_min_w: float | None = Field(
        default=None,
        description="where NVIDIA makes the board's power limit configurable (H100 NVL: "
        "350-400 W), the lowest limit inside its spec; power_limit_w is then the highest. "
        "null: one fixed limit (power_limit_w)",
    )
    temp_warn_c: float | None = None
    temp_max_c: float | None = None
    nics: Nics | None = Field(
        default=None,
        description="the GPU fabric's NICs (fabric none: the GPUs use none); null: not "
        "described (an older expect.json, --gpu): the fabric checks say inconclusive",
    )
    source: str = ""


class Expectations(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    origin: str = Field(default="none", description="where these expectations came from")
    stack: str | None = None
    stack_digest: str | None = None
    image_id: str | None = None
    shape: str | None = None
    cloud: str | None = None
    gpu: str | None = Field(default=None, description="GPU SKU (images/compat/gpus.yaml)")
    gpu_count: int = Field(
        default=0,
        ge=0,
        description="expected GPUs; with shape None, 0 means 'unknown: at least one'",
    )
    gpus_expected: bool = Field(default=True, description="False on a shape without GPUs")
    hardware: Hardware | None = None
    driver: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    fabric_manager: str | None = None
    kernel_modules: Literal["open", "proprietary"] | None = None
    kernel: str | None = None
    dcgm: str | None = None
    container_toolkit: str | None = None
    packages: dict[str, str] = Field(
        default_factory=dict, description="package -> version that must be installed"
    )
    held: list[str] = Field(default_factory=list, description="packages that must be on hold")
    network: Network = Field(
        default_factory=Network,
        description="the fabric software the image installs (EFA + aws-ofi-nccl, DOCA-OFED + "
        "nvidia-peermem); a fabric left null is not pinned: its checks skip",
    )
    validator_toolkit: dict[str, str] | None = Field(
        default=None,
        description="the validator's GPU toolkit the image carries: torch, cuda (X.Y), variant "
        "(cuXY); null when the stack pins none",
    )
    profile: Literal["boot", "quick", "full", "burn"] | None = Field(
        default=None, description="the stack's validation.profile (the weakest the gate accepts)"
    )
    mig_mode: bool = False
    compute_mode: Literal["DEFAULT", "EXCLUSIVE_PROCESS", "PROHIBITED"] = "DEFAULT"
    persistence_mode: bool = True

    @property
    def names_gpus(self) -> bool:
        """The host must have GPUs: a GPU shape, model or count, or an NVIDIA driver pin
        (the image's own expect.json knows its driver, not the shape it will boot on)."""
        return self.gpus_expected and bool(
            self.gpu or self.gpu_count or self.hardware or self.driver
        )

    @property
    def pins(self) -> dict[str, object]:
        return {
            "stack": self.stack,
            "stack_digest": self.stack_digest,
            "driver": self.driver,
            "cuda": self.cuda,
            "nccl": self.nccl,
            "fabric_manager": self.fabric_manager,
            "kernel_modules": self.kernel_modules,
            "kernel": self.kernel,
            "dcgm": self.dcgm,
            "container_toolkit": self.container_toolkit,
            "validator_toolkit": self.validator_toolkit,
        }


def hardware_for(images_dir: Path, shape: str) -> tuple[dict[str, Any], Hardware | None]:
    """The shape's row and its hardware expectations (None for a shape without GPUs)."""
    shapes = shape_rows(images_dir / "catalog")
    if shape not in shapes:
        raise UserError(
            f"unknown shape '{shape}'",
            where=str(images_dir / "catalog" / "shapes.yaml"),
            hint="Known shapes: " + ", ".join(sorted(shapes)),
        )
    row = shapes[shape]
    if not row.get("gpu"):
        return row, None
    stale = sorted(k for k in ("pcie_gen", "pcie_width") if k in row)
    if stale:
        raise UserError(
            f"shape '{shape}' sets {', '.join(stale)}: the PCIe link a GPU trains to is the GPU "
            f"table's (images/compat/gpus.yaml {row['gpu']}.pcie), one copy for every check",
            where=str(images_dir / "catalog" / "shapes.yaml"),
            hint="Delete the field from the shape; change the GPU's pcie in gpus.yaml if it "
            "is wrong for every host of that GPU",
        )
    gpu = gpu_row(images_dir / "compat", row["gpu"])
    pcie = gpu_pcie(images_dir / "compat", gpu["sku"])  # the GPU table's one copy
    power = gpu_power(images_dir / "compat", gpu["sku"])
    if row.get("power_limit_w") is not None:  # the limit the cloud documents for the shape
        if not str(row.get("power_source") or "").strip():
            raise UserError(
                f"shape '{shape}' sets power_limit_w without power_source: the power range is "
                f"the GPU table's (images/compat/gpus.yaml {row['gpu']}.power); a shape sets "
                "its own only where its cloud documents the limit it configures",
                where=str(images_dir / "catalog" / "shapes.yaml"),
                hint="Delete power_limit_w from the shape, or cite the cloud's page in "
                "power_source",
            )
        power = {"max_w": float(row["power_limit_w"]), "source": str(row["power_source"])}
    hw = Hardware(
        nvml_names=list(gpu.get("nvml_names") or ()),
        arch=gpu.get("arch"),
        memory_gib=gpu.get("memory_gib"),
        nvswitch=bool(gpu.get("nvswitch")),
        pcie_gen=pcie.get("gen"),
        pcie_width=pcie.get("width"),
        nvlink_links=int(row.get("nvlink_links") or 0),
        power_limit_w=power.get("max_w"),
        power_limit_min_w=power.get("min_w"),
        temp_warn_c=row.get("temp_warn_c"),
        temp_max_c=row.get("temp_max_c"),
        nics=Nics.model_validate(row["nics"]) if row.get("nics") else None,
        source="; ".join(
            s for s in (row.get("hardware_source"), f"{gpu['sku']}: {gpu.get('source', '')}") if s
        ),
    )
    return row, hw


def shape_fields(images_dir: Path, shape: str | None) -> dict[str, object]:
    if shape is None:
        return {}
    row, hw = hardware_for(images_dir, shape)
    return {
        "shape": shape,
        "cloud": row.get("cloud"),
        "gpu": row.get("gpu"),
        "gpu_count": int(row.get("gpu_count") or 0),
        "gpus_expected": bool(row.get("gpu")),
        "hardware": hw,
    }


def gpu_fields(images_dir: Path, sku: str, count: int) -> dict[str, object]:
    """``validate --gpu SKU --gpu-count N``: a host you already run, described by its GPUs
    alone (no shape in the catalog). The GPU table gives the model's NVML names, memory and
    architecture; what a shape adds (PCIe link, power limit, NICs) is not known, so those
    checks judge only what NVML reports about itself. NVSwitch, and the datasheet's NVLink
    links per GPU (``nvlink_links``), are expected only where the GPU table says that many
    GPUs share a baseboard's NVSwitches (``nvswitch_gpus``: 8 on HGX; fewer GPUs of an SXM
    SKU are a 4-GPU board joined by NVLink directly, or a VM given part of a baseboard)."""
    if count < 1:
        raise UserError(
            f"--gpu-count {count}: a host validated by its GPUs has at least one",
            hint="Pass the number of GPUs the host has (nvidia-smi -L lists them)",
        )
    gpu = gpu_row(images_dir / "compat", sku)
    board = bool(gpu.get("nvswitch")) and count >= int(gpu.get("nvswitch_gpus") or 2)
    hw = Hardware(
        nvml_names=list(gpu.get("nvml_names") or ()),
        arch=gpu.get("arch"),
        memory_gib=gpu.get("memory_gib"),
        nvswitch=board,
        # the whole baseboard: every GPU's NVLink links (the datasheet's count) are expected
        nvlink_links=int(gpu.get("nvlink_links") or 0) if board else 0,
        source=f"{gpu['sku']}: {gpu.get('source', '')}"
        + (
            f"; NVSwitch from {gpu['nvswitch_gpus']} GPUs: {gpu.get('nvswitch_source')}"
            if gpu.get("nvswitch_gpus")
            else ""
        )
        + (f"; NVLink links per GPU: {gpu.get('nvlink_source')}" if board else "")
        + " (--gpu: no shape, so no PCIe, power or NIC expectations)",
    )
    return {"gpu": gpu["sku"], "gpu_count": count, "gpus_expected": True, "hardware": hw}


def from_file(path: Path) -> Expectations:
    data = read_json(
        path,
        "expectations file",
        "Expectations are JSON described by imagectl/validators/schema/expect.schema.json",
    )
    try:
        expect = Expectations.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UserError(
            f"{'standard input' if str(path) == '-' else path}: {loc}: {first['msg']}",
            hint="Expectations are described by imagectl/validators/schema/expect.schema.json",
        ) from exc
    if expect.origin == "none":
        expect = expect.model_copy(update={"origin": f"file:{path}"})
    return expect


def resolve_expectations(
    *,
    images_dir: Path,
    expect_file: Path | None,
    shape: str | None,
    replay: dict[str, Any] | None = None,
    gpu: tuple[str, int] | None = None,
) -> Expectations:
    """``--expect`` / the image's own expect.json / only the shape / nothing (``--stack``
    is the controller's: ``imagectl.stacks.expectations.from_stack``).

    When replaying a snapshot, the image's own expect.json is the one recorded in the
    snapshot (host fact ``expect_file``), never this machine's.
    """
    expect: Expectations | None = None
    if expect_file is None and replay is not None:
        recorded = (replay.get("host") or {}).get("expect_file")
        if isinstance(recorded, dict) and "$invalid" not in recorded:
            try:
                expect = Expectations.model_validate(recorded)
            except ValidationError as exc:
                raise UserError(
                    f"the snapshot's recorded expect.json is invalid: {exc.errors()[0]['msg']}",
                    hint="Pass --expect or --stack",
                ) from exc
            expect = expect.model_copy(update={"origin": "snapshot:/etc/imagectl/expect.json"})
    elif expect_file is None and DEFAULT_EXPECT_FILE.is_file():
        expect_file = DEFAULT_EXPECT_FILE
    if expect_file is not None:
        expect = from_file(expect_file)
    if expect is not None:
        if shape and shape != expect.shape:
            update = shape_fields(images_dir, shape)
            expect = expect.model_copy(update=update)
        if gpu is not None:  # honoured as --shape is: the host is judged as these GPUs
            update = {"shape": None, "cloud": None, **gpu_fields(images_dir, *gpu),
                      "origin": f"{expect.origin}, gpu:{gpu[0]}x{gpu[1]}"}  # fmt: skip
            expect = expect.model_copy(update=update)
        return expect
    if shape:
        return Expectations(origin=f"shape:{shape}", **shape_fields(images_dir, shape))
    if gpu is not None:
        return Expectations(origin=f"gpu:{gpu[0]}x{gpu[1]}", **gpu_fields(images_dir, *gpu))
    return Expectations(origin="none")


def nvidia_gpus_on_host(sysfs: Path = Path("/sys/bus/pci/devices")) -> int:
    """NVIDIA GPUs on the PCI bus (vendor 0x10de, class display/3D), driver or not."""
    count = 0
    for dev in sysfs.glob("*"):
        try:
            vendor = (dev / "vendor").read_text().strip()
            klass = (dev / "class").read_text().strip()
        except OSError:
            continue
        if vendor == "0x10de" and klass[:6] in ("0x0300", "0x0302"):
            count += 1
    return count


def require_expectations(expect: Expectations, snapshot: dict[str, Any] | None) -> None:
    """A host with GPUs and no expectations is bad input (exit 2), never a pass by skips."""
    if expect.origin != "none":
        return
    if snapshot is not None:
        nvml = snapshot.get("nvml") or {}
        gpus = int((nvml.get("system") or {}).get("nvmlDeviceGetCount") or 0) or len(
            nvml.get("devices") or []
        )
        where = "the snapshot"
    else:
        gpus, where = nvidia_gpus_on_host(), "this host"
    if gpus:
        raise UserError(
            f"{where} has {gpus} NVIDIA GPU(s) but no expectations: no "
            f"{DEFAULT_EXPECT_FILE} (the image's own), and none of --stack, --expect, "
            "--shape or --gpu/--gpu-count was given, so every check would be judged against "
            "nothing",
            hint="Pass --stack STACK [--shape SHAPE], --expect FILE, --shape SHAPE, or for a "
            "host with no catalog shape --gpu MODEL --gpu-count N (e.g. --gpu 'NVIDIA H200' "
            "--gpu-count 8)",
        )


def expect_schema() -> dict[str, object]:
    schema = Expectations.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "imagectl validator expectations (expect.json)"
    return schema
