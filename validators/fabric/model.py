"""The snapshot's ``fabric`` section: every source the fabric checks read, recorded as read
(sysfs strings, command output), so a replay parses exactly what the host showed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CommandRun(BaseModel):
    """One command as it ran."""

    model_config = ConfigDict(extra="forbid")
    argv: list[str]
    exit_code: int | None = Field(default=None, description="null: it could not be started")
    stdout: str = ""
    stderr_tail: str = ""
    duration_s: float = 0.0
    error: str | None = Field(default=None, description="why it could not be started")


class RdmaPort(BaseModel):
    """/sys/class/infiniband/<device>/ports/<port>/: the files as read."""

    model_config = ConfigDict(extra="forbid")
    port: int = Field(ge=0)
    state: str | None = Field(default=None, description="e.g. '4: ACTIVE'")
    phys_state: str | None = Field(default=None, description="e.g. '5: LinkUp'")
    rate: str | None = Field(default=None, description="e.g. '400 Gb/sec (4X NDR)'")
    link_layer: str | None = Field(default=None, description="InfiniBand | Ethernet | ...")
    counters: dict[str, int] = Field(default_factory=dict, description="counters/* (first read)")
    counters_after: dict[str, int] | None = Field(
        default=None, description="counters/* read again interval_s later; null: read once"
    )
    hw_counters: dict[str, int] | None = Field(
        default=None,
        description="hw_counters/* (the driver's own: EFA retrans_*, *_wr_err, "
        "unresponsive_remote_events, ...; mlx5 out_of_buffer, rnr_nak_retry_err, ...); "
        "null: not recorded (an older snapshot): unknown",
    )
    hw_counters_after: dict[str, int] | None = Field(
        default=None, description="hw_counters/* read again interval_s later; null: read once"
    )


class RdmaDevice(BaseModel):
    """One /sys/class/infiniband/<name> device (an EFA device, an HCA)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    driver: str | None = Field(default=None, description="its PCI function's kernel driver")
    pci: str | None = Field(default=None, description="its PCI function, e.g. 0000:10:1b.0")
    numa_node: int | None = None
    ports: list[RdmaPort] = Field(default_factory=list)


class PcieLink(BaseModel):
    """The function's PCIe link as sysfs prints it (current_link_speed, current_link_width,
    max_link_speed, max_link_width); null: the file could not be read."""

    model_config = ConfigDict(extra="forbid")
    current_speed: str | None = Field(default=None, description="e.g. '32.0 GT/s PCIe'")
    current_width: str | None = Field(default=None, description="e.g. '16'")
    max_speed: str | None = None
    max_width: str | None = None


class PciFunction(BaseModel):
    """A GPU or NIC PCI function and the bridges above it (/sys/bus/pci/devices)."""

    model_config = ConfigDict(extra="forbid")
    address: str
    pci_class: str = Field(description="/sys/bus/pci/devices/<address>/class, e.g. 0x030200")
    vendor: str
    upstream: list[str] = Field(
        default_factory=list,
        description="the PCI bridges from the root port down to the function (its sysfs path)",
    )
    numa_node: int | None = None
    link: PcieLink | None = Field(
        default=None, description="its PCIe link (NICs); null: not recorded (older snapshot)"
    )


class NetDev(BaseModel):
    """One /sys/class/net/<name> interface with a PCI function (gVNIC, ENA, mlx5 Ethernet)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    driver: str | None = Field(default=None, description="e.g. gve, ena, mlx5_core")
    pci: str | None = None
    operstate: str | None = Field(default=None, description="e.g. up, down")
    speed_mbps: int | None = Field(default=None, description="/sys/class/net/<name>/speed")
    mtu: int | None = None


class NcclRun(BaseModel):
    """A tiny NCCL run (ncclCommInitAll on every GPU) with NCCL_DEBUG=INFO, and the topology
    NCCL detected (NCCL_TOPO_DUMP_FILE)."""

    model_config = ConfigDict(extra="forbid")
    run: CommandRun
    env: dict[str, str] = Field(
        default_factory=dict, description="the NCCL_*, FI_* and OFI_* variables it ran with"
    )
    topo_xml: str | None = Field(default=None, description="NCCL's topology dump; null: none")


class FabricSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    interval_s: float = Field(default=0.0, ge=0, description="between the two counter reads")
    rdma: list[RdmaDevice] = Field(default_factory=list)
    pci: list[PciFunction] = Field(default_factory=list)
    modules: dict[str, bool] = Field(
        default_factory=dict, description="kernel module -> loaded (/sys/module/<name>)"
    )
    fi_info: CommandRun | None = Field(default=None, description="fi_info -p efa")
    fi_version: CommandRun | None = Field(default=None, description="fi_info --version")
    nccl: NcclRun | None = Field(default=None, description="null: no NCCL run recorded")
    netdevs: list[NetDev] | None = Field(
        default=None,
        description="every network interface with a PCI function, RDMA or not (gVNIC for "
        "GPUDirect-TCPX/O included); null: not recorded (an older snapshot): unknown",
    )
    acs: dict[str, int | None] | None = Field(
        default=None,
        description="PCI bridge above a GPU or NIC -> its ACS Control register (PCIe ACS "
        "extended capability, offset 6: bit 0 SrcValid, 1 TransBlk, 2 ReqRedir, 3 CmpltRedir, "
        "4 UpstreamFwd, 5 EgressCtrl, 6 DirectTrans); null value: the bridge has no ACS "
        "capability; null: not recorded (an older snapshot): unknown",
    )


FABRIC_DOC = (
    "The GPU fabric as read: /sys/class/infiniband devices (driver, PCI function, ports' "
    "state, phys_state, rate, link_layer, error counters read twice interval_s apart), GPU "
    "and NIC PCI functions with the bridges above them, loaded modules (nvidia_peermem, "
    "efa, ...), `fi_info -p efa` and `fi_info --version`, and a tiny NCCL run's "
    "NCCL_DEBUG=INFO output and topology dump; also every network interface "
    "(netdevs), each NIC's PCIe link, the ACS control bits of the bridges above GPUs and "
    "NICs, and each RDMA port's hw_counters (read twice). Absent: not captured; replay then "
    "skips the fabric checks. A part absent from an older snapshot is unknown, never healthy."
)
