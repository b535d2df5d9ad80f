"""The fabric checks: the live reader against a real sysfs-shaped tree and a real
``fi_info`` executable on PATH (the boundaries: files and a command), the interconnect
fault library's coverage, and the coverage requirement per shape."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from validator_support import ROOT, SNAPSHOTS, library_cases

from imagectl.stacks.expectations import from_stack
from imagectl.validators.coverage import required_checks
from imagectl.validators.fabric.capture import capture_fabric
from imagectl.validators.fabric.parse import (
    fi_info_efa_domains,
    libfabric_version,
    nccl_net,
    nccl_topology,
    port_rate,
)
from imagectl.validators.fabric.topology import nearest_nics

CASES = library_cases()
IMAGES = ROOT / "images"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _sysfs(root: Path, symbol_errors: int) -> Path:
    """A /sys with one GPU and one HCA behind one PCIe switch, and nvidia_peermem loaded."""
    devices = root / "devices" / "pci0000:00" / "0000:00:01.0" / "0000:01:00.0"
    gpu = devices / "0000:02:00.0" / "0000:03:00.0"
    hca = devices / "0000:02:01.0" / "0000:04:00.0"
    for fn, vendor, klass in ((gpu, "0x10de", "0x030200"), (hca, "0x15b3", "0x020700")):
        _write(fn / "vendor", vendor + "\n")
        _write(fn / "class", klass + "\n")
        _write(fn / "numa_node", "0\n")
        link = root / "bus" / "pci" / "devices" / fn.name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(fn)
    driver = root / "bus" / "pci" / "drivers" / "mlx5_core"
    driver.mkdir(parents=True)
    (hca / "driver").symlink_to(driver)
    ib = root / "class" / "infiniband" / "mlx5_ib0"
    ib.mkdir(parents=True)
    (ib / "device").symlink_to(hca)
    port = ib / "ports" / "1"
    _write(port / "state", "4: ACTIVE\n")
    _write(port / "phys_state", "5: LinkUp\n")
    _write(port / "rate", "400 Gb/sec (4X NDR)\n")
    _write(port / "link_layer", "InfiniBand\n")
    _write(port / "counters" / "symbol_error", f"{symbol_errors}\n")
    (root / "module" / "nvidia_peermem").mkdir(parents=True)
    return port


def test_live_reader_reads_sysfs_and_fi_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sysfs(tmp_path / "sys", symbol_errors=7)
    bin_dir = tmp_path / "bin"
    fi_info = bin_dir / "fi_info"
    _write(
        fi_info,
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then printf "fi_info: 2.1.0\\nlibfabric: 2.1.0\\n"; exit 0; fi\n'
        'printf "provider: efa\\n    fabric: efa\\n    domain: rdmap16s27-rdm\\n"\n',
    )
    fi_info.chmod(fi_info.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    fab = capture_fabric(tmp_path / "sys", interval_s=0.01)
    (dev,) = fab.rdma
    assert (dev.name, dev.driver, dev.pci) == ("mlx5_ib0", "mlx5_core", "0000:04:00.0")
    port = dev.ports[0]
    assert port.state == "4: ACTIVE" and port.counters == {"symbol_error": 7}
    assert port.counters_after == {"symbol_error": 7}
    assert port_rate(port.rate) is not None and port_rate(port.rate).width == "4X"  # type: ignore[union-attr]
    assert fab.modules["nvidia_peermem"] and not fab.modules["efa"]
    assert fi_info_efa_domains(fab.fi_info.stdout if fab.fi_info else "") == ["rdmap16s27"]
    assert libfabric_version(fab.fi_version.stdout if fab.fi_version else "") == "2.1.0"
    gpu = next(f for f in fab.pci if f.vendor == "0x10de")
    assert gpu.upstream == ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0"]
    assert nearest_nics(fab, ["0000:04:00.0"]) == {"0000:03:00.0": ["0000:04:00.0"]}
    # the section is what a snapshot records: it round-trips through JSON
    assert json.loads(fab.model_dump_json())["rdma"][0]["name"] == "mlx5_ib0"


def test_live_reader_without_fi_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    fab = capture_fabric(tmp_path / "no-sys", interval_s=0)
    assert fab.rdma == [] and fab.fi_info is not None and fab.fi_info.exit_code is None
    assert "not found" in (fab.fi_info.error or "")


def test_nccl_lines_and_topology_parse() -> None:
    snap = json.loads((SNAPSHOTS / "healthy" / "h100-p5-efa.json").read_text())
    run = snap["fabric"]["nccl"]
    seen = nccl_net(run["run"]["stdout"])
    assert (seen.network, seen.ofi_plugin, seen.ofi_nics) == ("Libfabric", "1.16.3", 32)
    topo = nccl_topology(run["topo_xml"])
    assert topo.nearest["0000:18:00.0"] == ["rdmap25s0", "rdmap26s0", "rdmap27s0", "rdmap28s0"]
    assert all(topo.gdr.values()) and len(topo.gdr) == 32
    assert nccl_topology("<!DOCTYPE x [<!ENTITY a 'b'>]><system/>").error


def test_interconnect_library_covers_each_class_twice() -> None:
    faults = {c["fault"]: c for c in CASES.values() if c["fault"]}
    classes = {
        "missing EFA device": ("efa-device-missing", "efa-no-device-at-all"),
        "NCCL on sockets": ("nccl-net-socket-fallback-efa", "nccl-net-socket-fallback-ib"),
        "IB port down / width": ("ib-port-down", "ib-port-reduced-width"),
        "rising symbol errors": ("ib-symbol-errors-rising", "ib-link-downed-rising"),
        "peermem": ("ib-peermem-not-loaded", "ib-peermem-not-loaded-gdr-off"),
    }
    for what, names in classes.items():
        for name in names:
            assert faults[name]["expect_fail"], f"{what}: {name} must fail"
    for control in ("fabric-healthy-quick", "ib-symbol-errors-settled", "ib-peermem-not-pinned"):
        assert not faults[control]["expect_fail"], control


@pytest.mark.parametrize(
    ("shape", "fabric"),
    [
        ("p5.48xlarge", "efa"),
        ("Standard_ND96isr_H100_v5", "ib"),
        ("a3-highgpu-8g", "gvnic"),
        ("a3-ultragpu-8g", "roce"),
        ("Standard_NC40ads_H100_v5", None),
    ],
)
def test_coverage_requires_the_shapes_fabric(shape: str, fabric: str | None) -> None:
    expect = from_stack(IMAGES, "h100-training", shape)
    fab = [c for c in required_checks("quick", expect) if c.startswith("fabric.")]
    if fabric is None:
        assert fab == []  # NC H100 v5: its GPU uses no NIC
    elif fabric in ("gvnic", "roce"):
        # Google Cloud's GPU networks: no software pin in the stack, NCCL judged on every image
        assert {"fabric.nccl.net", "fabric.topology"} <= set(fab)
        assert ("fabric.gdr" in fab) == (fabric == "roce")
    else:
        assert f"fabric.{fabric}.{'provider' if fabric == 'efa' else 'ports'}" in fab
        assert {"fabric.nccl.net", "fabric.gdr", "fabric.topology"} <= set(fab)
    assert required_checks("boot", expect) == []


def test_replay_cli_judges_a_fabric_fault() -> None:
    import subprocess

    imagectl = str(Path(sys.executable).parent / "imagectl")
    out = subprocess.run(
        [imagectl, "validate", "--replay",
         str(SNAPSHOTS / "faults/h100-ndv5-ib--ib-symbol-errors-rising.json"), "--json"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    receipt = json.loads(out.stdout)
    failed = [c for c in receipt["checks"] if c["outcome"] == "fail"]
    assert [c["id"] for c in failed] == ["fabric.ib.counters"]
    assert failed[0]["action"] == "DRAIN" and failed[0]["details"]["attribution"] == "link"
