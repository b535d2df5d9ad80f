"""Every GPU network a cloud sells, judged: NCCL on Google's GPUDirect-TCPXO and RDMA (gIB)
shapes, and each GPU NIC's link rate.

- a3-megagpu-8g (GPUDirect-TCPXO, FasTrak plugin): NCCL_FASTRAK_IFNAME naming half the GPU
  NICs (eth1-eth4 of eth1-eth8) opens 4 of 8 rails: the image's setting (BLOCK_IMAGE);
  NCCL falling back to sockets ('Using network Socket') likewise.
- a3-ultragpu-8g (RDMA over RoCE, gIB plugin): 'Using network Socket' (the plugin did not
  load) or 'Using network IB' (NCCL's built-in IB instead of gIB): BLOCK_IMAGE.
- Link rates: a ConnectX-7 port trained at 200 Gb/s on a 400 Gb/s shape, a gVNIC GPU NIC at
  100 of 200 Gb/s: DRAIN (the host's link).
- Healthy controls: both bases at the quick profile (NCCL judged), and the bases at boot.
"""

from __future__ import annotations

from collections.abc import Callable

from niclib import fastrak_env, nccl_fastrak_log, nccl_gib_log, nccl_tcpx_log, tcpx_env
from snaplib import Fault, Snap

A3H, A3M, A3U = "h100-a3high-tcpx", "h100-a3mega-tcpxo", "h200-a3ultra-roce"
TCPXO = (
    "Google's GPUDirect-TCPXO NCCL setup (NCCL_FASTRAK_IFNAME=eth1,...,eth8: every GPU NIC; "
    "validators/data/fabric.yaml nccl_net gvnic-tcpxo); NCCL environment variables "
    "documentation ('... set by environment to ...')"
)
GIB = (
    "Google Cloud AI Hypercomputer 'Collect and understand NCCL logs for troubleshooting': "
    "'Using network gIB' when the gIB plugin loaded; 'Using network Socket' (built-in TCP) and "
    "'Using network IB' (built-in IB) when it did not (validators/data/fabric.yaml nccl_net roce)"
)
RATE = "validators/data/fabric.yaml nic_rate; images/catalog/shapes.yaml nics.rate_gbps"
GPU_NICS = [f"eth{i}" for i in range(1, 9)]
TCPX_NICS = [f"eth{i}" for i in range(1, 5)]
TCPX = (
    "Google's GPUDirect-TCPX NCCL setup (NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4: "
    "every GPU NIC; validators/data/fabric.yaml nccl_net gvnic-tcpx)"
)


def tcpx_ifname(names: list[str]) -> Callable[[Snap], None]:
    """The image bakes NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=<names>."""

    def apply(s: Snap) -> None:
        run = s["fabric"]["nccl"]
        run["env"] = {**tcpx_env(TCPX_NICS), "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": ",".join(names)}
        run["run"]["stdout"] = nccl_tcpx_log(TCPX_NICS).replace(
            f"SOCKET_IFNAME set by environment to {','.join(TCPX_NICS)}.",
            f"SOCKET_IFNAME set by environment to {','.join(names)}.",
        )

    return apply


HCAS = [f"mlx5_{i}" for i in range(8)]


def fastrak_ifname(names: list[str]) -> Callable[[Snap], None]:
    """The image bakes NCCL_FASTRAK_IFNAME=<names>: the probe ran with it and NCCL says so."""

    def apply(s: Snap) -> None:
        run = s["fabric"]["nccl"]
        env = fastrak_env(GPU_NICS)
        env["NCCL_FASTRAK_IFNAME"] = ",".join(names)
        run["env"] = env
        run["run"]["stdout"] = nccl_fastrak_log(GPU_NICS).replace(
            f"NCCL_FASTRAK_IFNAME set by environment to {','.join(GPU_NICS)}.",
            f"NCCL_FASTRAK_IFNAME set by environment to {','.join(names)}.",
        )

    return apply


def nccl_log(text: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        s["fabric"]["nccl"]["run"]["stdout"] = text

    return apply


def roce_port_rate(index: int, rate: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        dev = next(d for d in s["fabric"]["rdma"] if d["name"] == f"mlx5_{index}")
        dev["ports"][0]["rate"] = rate

    return apply


def gvnic_speed(name: str, mbps: int) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        next(n for n in s["fabric"]["netdevs"] if n["name"] == name)["speed_mbps"] = mbps

    return apply


FAULTS: dict[str, Fault] = {
    "gpu-network-healthy-quick": Fault(
        (A3H, A3U),
        lambda s: None,
        {},
        source=f"{GIB}; {TCPX}: the healthy A3 Ultra and A3 High bases with NCCL judged (quick "
        "profile; the A3 Mega's control is shape-healthy-quick)",
        profile="quick",
    ),
    "a3mega-fastrak-ifname-half": Fault(
        (A3M,),
        fastrak_ifname(GPU_NICS[:4]),
        {"fabric.nccl.rails": "BLOCK_IMAGE"},
        source=f"{TCPXO}: NCCL_FASTRAK_IFNAME=eth1,eth2,eth3,eth4 baked into the image opens 4 of "
        "the 8 GPU NICs: every job runs at half the shape's GPU network bandwidth",
        profile="quick",
    ),
    "a3high-tcpx-ifname-half": Fault(
        (A3H,),
        tcpx_ifname(TCPX_NICS[:2]),
        {"fabric.nccl.rails": "BLOCK_IMAGE"},
        source=f"{TCPX}: NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2 opens 2 of the 4 GPU NICs",
        profile="quick",
    ),
    "a3high-nccl-socket-fallback": Fault(
        (A3H,),
        nccl_log(nccl_tcpx_log(TCPX_NICS, network="Socket")),
        {"fabric.nccl.net": "BLOCK_IMAGE"},
        source=f"{TCPX}: 'Using network Socket': the TCPX plugin did not load",
        profile="quick",
    ),
    "a3mega-nccl-socket-fallback": Fault(
        (A3M,),
        nccl_log(nccl_fastrak_log(GPU_NICS, network="Socket")),
        {"fabric.nccl.net": "BLOCK_IMAGE"},
        source=f"{TCPXO}: 'Using network Socket' after 'Could not find: libnccl-net.so': the "
        "FasTrak plugin is not found, NCCL runs over TCP",
        profile="quick",
    ),
    "a3ultra-nccl-socket-fallback": Fault(
        (A3U,),
        nccl_log(nccl_gib_log(HCAS, network="Socket")),
        {"fabric.nccl.net": "BLOCK_IMAGE"},
        source=f"{GIB}: the gIB plugin did not load and NCCL fell back to sockets",
        profile="quick",
    ),
    "a3ultra-nccl-builtin-ib": Fault(
        (A3U,),
        nccl_log(
            nccl_gib_log(HCAS, network="Socket").replace("Using network Socket", "Using network IB")
        ),
        {"fabric.nccl.net": "BLOCK_IMAGE"},
        source=f"{GIB}: 'Using network IB' is NCCL's built-in IB plugin, not gIB",
        profile="quick",
    ),
    "a3ultra-roce-port-200g": Fault(
        (A3U,),
        roce_port_rate(5, "200 Gb/sec (4X HDR)"),
        {"fabric.nic.rate": "DRAIN"},
        source=f"{RATE}: a3-ultragpu-8g's ConnectX-7 NICs are 400 Gb/s (Google Cloud 'Networking "
        "and GPU machines': 8 x 400 = 3,200 Gbps); mlx5_5 trained at 200 Gb/s",
    ),
    "a3mega-gvnic-100g": Fault(
        (A3M,),
        gvnic_speed("eth3", 100000),
        {"fabric.nic.rate": "DRAIN"},
        source=f"{RATE}: a3-megagpu-8g's GPU NICs are 200 Gb/s each (Google Cloud 'Networking "
        "and GPU machines'); eth3 reports 100000 Mb/s",
    ),
    "a3mega-primary-gvnic-slower": Fault(
        (A3M,),
        gvnic_speed("eth0", 100000),
        {},
        source=f"{RATE}: the primary gVNIC (eth0, behind no GPU's switch) carries no GPU "
        "traffic; its speed is not the GPU network's",
    ),
}
