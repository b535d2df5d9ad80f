"""An emulated fleet node: a replayed snapshot, made into the node a test needs.

``node_snapshot`` takes a recorded healthy snapshot and sets what differs between fleet
nodes (the image it booted, its region, when it booted) and what a test injects: Xid lines
in this boot's kernel log after the boot check ran (the line format of the recorded Xid 79
fault, ``tests/snapshots/faults/h100-sxm-8x--xid79-fallen-off-bus.json``; NVIDIA's Xid
Catalog: 79 "GPU has fallen off the bus"), and clock-event reasons or a pending row remap
on a GPU (NVML's ``nvmlDeviceGetCurrentClocksEventReasons`` bits and
``nvmlDeviceGetRemappedRows`` tuple). ``node_metrics`` is then the real validator's boot
file (``render``) and the real watcher's file (``render_watch``) over that snapshot: the
boot check sees the node as it booted, the watcher as it is now.
"""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

from imagectl.validators.expectations import resolve_expectations
from imagectl.validators.prometheus import render
from imagectl.validators.session import Options, build_context, validate
from imagectl.validators.snapshot import load_snapshot
from imagectl.validators.watch import observe, render_watch

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "snapshots"
HEALTHY_8X = SNAPSHOTS / "healthy" / "h100-sxm-8x.json"
XID_LINE = (
    "{when} host kernel: NVRM: Xid (PCI:0000:{bus}:00): {code}, pid=4242, name=python3, "
    "GPU has fallen off the bus."
)

_loaded: dict[Path, dict[str, Any]] = {}


def base(path: Path = HEALTHY_8X) -> dict[str, Any]:
    if path not in _loaded:
        _loaded[path] = load_snapshot(path)
    return _loaded[path]


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")


def node_snapshot(
    *,
    image_id: str,
    booted_at: float,
    region: str = "local-1",
    path: Path = HEALTHY_8X,
    clock_events: dict[int, int] | None = None,
    remap_pending: tuple[int, ...] = (),
) -> dict[str, Any]:
    snap = copy.deepcopy(base(path))
    host = snap["host"]
    host["cloud_image"] = {
        **(host.get("cloud_image") or {}),
        "image_id": image_id,
        "region": region,
    }
    host["boot"] = {**host["boot"], "booted_at": booted_at}
    devices = snap["nvml"]["devices"]
    for gpu, mask in (clock_events or {}).items():
        devices[gpu]["nvmlDeviceGetCurrentClocksEventReasons"] = mask
    for gpu in remap_pending:
        devices[gpu]["nvmlDeviceGetRemappedRows"] = [0, 0, 1, 0]
    # the recorded log's lines predate this boot's time: this boot starts with a clean log
    snap["kernel_log"] = {**snap["kernel_log"], "text": ""}
    return snap


def with_xids(snap: dict[str, Any], times: list[float], code: int = 79) -> dict[str, Any]:
    """The snapshot as the watcher sees it later: Xid ``code`` lines at ``times``."""
    later = copy.deepcopy(snap)
    buses = [d["nvmlDeviceGetPciInfo_v3"]["busIdLegacy"].split(":")[1].lower()
             for d in later["nvml"]["devices"]]  # fmt: skip
    lines = [XID_LINE.format(when=_stamp(t), bus=buses[i % len(buses)], code=code)
             for i, t in enumerate(times)]  # fmt: skip
    later["kernel_log"] = {
        **later["kernel_log"],
        "text": "\n".join(lines) + ("\n" if lines else ""),
    }
    return later


def boot_file(snap: dict[str, Any], stack: str | None = None) -> str:
    """The boot unit's file for the node; ``stack``: the stack the image was built from
    (the snapshot's expectations name the stack it was recorded under)."""
    expect = resolve_expectations(
        images_dir=ROOT / "images", expect_file=None, shape=None, replay=snap, gpu=None
    )
    image_id = snap["host"]["cloud_image"]["image_id"]
    receipt = validate(Options(expect=expect, snapshot=snap, hygiene=False, image_id=image_id))
    if stack is not None:
        receipt = receipt.model_copy(update={"stack": stack})
    return render(receipt)


def watch_file(snap: dict[str, Any], now: float) -> str:
    return render_watch(observe(build_context(Options(snapshot=snap, hygiene=False)), now=now))
