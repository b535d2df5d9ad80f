"""Host drift: a hardware XID that a node's consecutive boot receipts both show on the
same GPU is a recurrence a reboot did not clear (NVIDIA Xid Catalog: contact the vendor).

The receipts are written by the real validator (``imagectl validate --replay``) from the
shipped H100 snapshot with an Xid 79 on one GPU, for two boots of one node.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from drift_helpers import stack_report

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "tests" / "snapshots" / "healthy" / "h100-sxm-8x.json"
XID79 = (
    "2026-11-20T10:03:00+0000 host kernel: NVRM: Xid (PCI:{bus}): 79, pid=0, "
    "name=<unknown>, GPU has fallen off the bus.\n"
)


def _boot(cli, tmp_path: Path, out: Path, boot_id: str, bus: str | None) -> None:  # type: ignore[no-untyped-def]
    snap = copy.deepcopy(json.loads(SNAPSHOT.read_text()))
    snap["host"]["boot"]["boot_id"] = boot_id
    if bus:
        snap["kernel_log"]["text"] += XID79.format(bus=bus)
    src = tmp_path / f"{boot_id}.snapshot.json"
    src.write_text(json.dumps(snap))
    cli(
        "validate", "--replay", str(src), "--stack", "h100-training", "--shape", "p5.48xlarge",
        "--no-hygiene", "-o", str(out),
    )  # fmt: skip
    assert out.is_file()


def _drift(cli, hosts: Path):  # type: ignore[no-untyped-def]
    return cli(
        "--root", str(REPO), "drift", "--hosts", str(hosts), "--stack", "h100-training",
        "--format", "json",
    )  # fmt: skip


def test_same_gpu_in_consecutive_boots_is_recurring(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hosts = tmp_path / "receipts" / "h100-sxm-8x-node"
    hosts.mkdir(parents=True)
    _boot(cli, tmp_path, hosts / "boot-1.json", "1111", "0000:5d:00")
    _boot(cli, tmp_path, hosts / "boot-2.json", "2222", "0000:5d:00")
    result = _drift(cli, tmp_path / "receipts")
    found = [
        f
        for f in stack_report(result, "h100-training")["findings"]
        if f["kind"] == "host-xid-recurring"
    ]
    assert len(found) == 1, result.out
    (rec,) = found
    assert rec["subject"] == "h100-sxm-8x-node" and rec["available"].startswith("Xid 79 ")
    assert rec["extra"]["device"] == "0000:5d:00" and rec["extra"]["gpu_uuid"]
    assert "ISOLATE_RMA" in rec["detail"] and result.code == 1


def test_another_gpu_or_a_clean_boot_between_is_not_recurring(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hosts = tmp_path / "receipts" / "node"
    hosts.mkdir(parents=True)
    _boot(cli, tmp_path, hosts / "boot-1.json", "1111", "0000:5d:00")
    _boot(cli, tmp_path, hosts / "boot-2.json", "2222", None)  # the reboot cleared it
    _boot(cli, tmp_path, hosts / "boot-3.json", "3333", "0000:5d:00")
    _boot(cli, tmp_path, hosts / "boot-4.json", "4444", "0000:9a:00")  # another GPU
    result = _drift(cli, tmp_path / "receipts")
    kinds = [f["kind"] for f in stack_report(result, "h100-training")["findings"]]
    assert "host-xid-recurring" not in kinds, result.out
