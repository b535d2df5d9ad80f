"""The XID catalog follows NVIDIA's Xid Catalog, and the kernel-log check judges incidents.

Expected values are the catalog's own ("Analyzing Xid Errors with the Xid Catalog",
docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): its "Resolution Bucket
(Immediate Action)" per code, and the text of its Xid 154 and Xid 144-150 rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from validator_support import SNAPSHOTS, expect_file, imagectl_in_process

from imagectl.validators.catalogs import xid_catalog
from imagectl.validators.host.boot_history import previous_boot, read_folder
from imagectl.validators.host.kernel_log import current_boot, parse_events
from imagectl.validators.results import Action
from tests.support import flat

# Buckets as the catalog prints them (Xid sheet, "Resolution Bucket (Immediate Action)").
CATALOG_BUCKETS = {
    8: "RESTART_APP",
    13: "RESTART_APP",
    31: "RESTART_APP",
    32: "RESTART_APP",
    38: "IGNORE",
    43: "IGNORE",
    44: "IGNORE",
    46: "RESET_GPU",
    63: "IGNORE",
    64: "RESET_GPU",
    68: "RESTART_APP",
    69: "RESTART_APP",
    79: "RESTART_BM",
    92: "IGNORE",
    94: "RESTART_APP",
    95: "RESET_GPU",
    119: "RESET_GPU",
    137: "IGNORE",
    141: "IGNORE",
    155: "RESET_GPU",
    157: "IGNORE",
    160: "IGNORE",
}
OURS = {"IGNORE": Action.NONE, "RESTART_APP": Action.RESTART_APP, "RESET_GPU": Action.RESET_GPU}
OURS["RESTART_BM"] = Action.REBOOT


@pytest.mark.parametrize("code", sorted(CATALOG_BUCKETS))
def test_entry_follows_the_catalogs_bucket(code: int) -> None:
    entry = xid_catalog().lookup("xid", code)
    bucket = CATALOG_BUCKETS[code]
    assert entry.bucket == bucket and entry.action == OURS[bucket]
    assert entry.ignore == (bucket == "IGNORE")
    assert entry.app == (bucket == "RESTART_APP" or code in (43, 137))  # the app's fault
    assert "analyzing-xid-catalog" in entry.source and f"Xid {code} " in entry.source


def test_every_entry_cites_the_catalog_and_none_isolates_within_a_boot() -> None:
    cat = xid_catalog()
    assert set(range(1, 173)) <= set(cat.xids)
    for code, entry in cat.xids.items():
        assert "Xid Catalog" in entry.source, code
        # within one boot: RESET_GPU or REBOOT at most (154 and 48-with-63/64 name DRAIN),
        # except the buckets that need hands: a reboot cannot fix them, they drain
        if entry.bucket in ("CHECK_MECHANICALS", "UPDATE_SWFW"):
            assert entry.action == Action.DRAIN, code
        else:
            assert entry.action.rank <= Action.REBOOT.rank, code
        if entry.recurrence_action is not None:
            assert entry.recurrence_action == Action.ISOLATE_RMA
    assert cat.lookup("xid", 155).mnemonic == "NVLINK_SW_DEFINED_ERROR"
    assert "intentional" in cat.lookup("xid", 155).meaning
    assert cat.lookup("xid", 155).recurrence_action is None  # investigate SW/user, not RMA
    unknown = cat.lookup("xid", 4000)
    assert not unknown.known and unknown.action == Action.RESET_GPU


def test_xid154_and_nvlink5_text() -> None:
    cat = xid_catalog()
    # the catalog's own example string for Xid 154
    text = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    assert cat.action_from_text(text) == Action.REBOOT
    assert cat.action_from_text("changed from 0x0 (None) to 0x3 (Drain P2P)") == Action.DRAIN
    # the catalog's message format: <Xid> <sub component> <fatal vs nonfatal> ...
    fatal = "NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x0 0x0 0x0 0x0 0x0)"
    assert cat.action_from_severity(fatal) == Action.RESET_GPU
    nonfatal = "RLW_REMAP Nonfatal XC0 i0 Link 03 (0x00000204 0x00000100 0x0 0x0 0x0 0x0 0x0)"
    assert cat.action_from_severity(nonfatal) == Action.NONE


def test_mig_lines_are_xids_of_their_gpu() -> None:
    text = (
        "NVRM: Xid (PCI:0000:2a:00 GPU-I:05 GPU-CI:00): 94, pid=811, name=llm, Contained: SM\n"
        "NVRM: Xid (PCI:0000:2a:00 GPU-I:03 GPU-CI:01): 94, pid=812, name=llm, Contained: SM\n"
    )
    (event,) = parse_events(text)
    assert (event.code, event.bus, event.count, event.incidents) == (94, "0000:2a:00", 2, 2)
    assert event.instances == ["GPU-I:05 GPU-CI:00", "GPU-I:03 GPU-CI:01"]
    assert event.processes == ["pid 811 (llm)", "pid 812 (llm)"]
    # older drivers print the address without "PCI:"
    (old,) = parse_events("NVRM: Xid (0000:03:00): 13, 0001 00000000 0000a197 000000ff\n")
    assert (old.code, old.bus) == (13, "0000:03:00")


def test_only_the_last_boot_counts() -> None:
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus."
    journal = f"-- Boot 1111 --\nJan 01 k: {xid}\n-- Boot 2222 --\nJan 02 k: NVRM: ok\n"
    assert parse_events(current_boot(journal)[0]) == []
    dmesg = f"[ 9000.5] {xid}\n[    1.2] Linux version 6.8.0\n[   12.0] NVRM: loaded\n"
    text, dropped = current_boot(dmesg)
    assert parse_events(text) == [] and dropped == 1
    stamped = f"2026-11-19T22:00:00+0000 h kernel: {xid}\n2026-11-20T10:00:00+0000 h kernel: x\n"
    booted_at = 1_795_075_200.0  # 2026-11-19T08:00:00Z: the 79 is of this boot
    assert len(parse_events(current_boot(stamped, booted_at)[0])) == 1
    assert parse_events(current_boot(stamped, booted_at + 86_400)[0]) == []


def _run(snapshot: str, *extra: str) -> dict:
    base = snapshot.split("/")[-1].split("--")[0].removesuffix(".json")
    out = imagectl_in_process(
        "validate", "--replay", str(SNAPSHOTS / snapshot), "--expect", str(expect_file(base)),
        "--json", *extra,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    (xid,) = [c for c in json.loads(out.stdout)["checks"] if c["id"] == "kernel.xid"]
    return xid


def test_application_xid_warns_naming_the_process() -> None:
    xid = _run("faults/h100-sxm-8x--xid13-one-crash.json")
    assert xid["outcome"] == "warn" and "pid 5150 (train.py)" in xid["message"]
    assert xid["measured"]["incidents"] == 1 and xid["measured"]["count"] == 4
    burst = _run("faults/h200-8x--xid31-burst.json")
    assert burst["outcome"] == "fail" and burst["action"] == "RESTART_APP"
    assert "pid 6001" in burst["message"] and "pid 6033" in burst["message"]


def _receipt(boot_id: str, started: str, code: int, uuid: str, gpu: int) -> dict:
    return {
        "kind": "imagectl.validation-receipt",
        "started_at": started,
        "host": {"boot": {"boot_id": boot_id}},
        "gpus": [{"index": gpu, "uuid": uuid}],
        "checks": [{"id": "kernel.xid", "outcome": "fail", "gpu": gpu, "measured": {"code": code}}],
    }


def test_history_folder_escalates_a_recurrence_on_the_same_gpu(tmp_path: Path) -> None:
    snap = json.loads((SNAPSHOTS / "healthy/h100-sxm-8x.json").read_text())
    uuid3 = snap["nvml"]["devices"][3]["nvmlDeviceGetUUID"]
    uuid4 = snap["nvml"]["devices"][4]["nvmlDeviceGetUUID"]
    history = tmp_path / "boots"
    history.mkdir()
    # two boots ago the same GPU had it; the previous boot had it on another GPU: no
    # recurrence (the latest other boot is what a reboot should have cleared)
    old = _receipt("b-old", "2026-11-18T08:00:00+00:00", 79, uuid3, 3)
    (history / "b-old.json").write_text(json.dumps(old))
    prev = _receipt("b-prev", "2026-11-19T08:00:00+00:00", 79, uuid4, 4)
    (history / "b-prev.json").write_text(json.dumps(prev))
    (history / "torn.json").write_text('{"kind": "imagectl.valid')  # power loss mid-write
    log = tmp_path / "kern.log"
    log.write_text(
        "2026-11-20T10:03:00+0000 h kernel: NVRM: Xid (PCI:0000:5d:00): 79, pid=0, "
        "name=<unknown>, GPU has fallen off the bus.\n"
    )
    args = ("--kernel-log", str(log), "--history", str(history))
    xid = _run("healthy/h100-sxm-8x.json", *args)
    assert xid["action"] == "REBOOT" and xid["gpu"] == 3
    assert xid["details"]["previous_boot"]["same_fault"] is False
    (torn,) = xid["details"]["history_unreadable"]
    assert torn.startswith("torn.json: ")
    prev = _receipt("b-prev", "2026-11-19T08:00:00+00:00", 79, uuid3, 0)  # other index
    (history / "b-prev.json").write_text(json.dumps(prev))
    xid = _run("healthy/h100-sxm-8x.json", *args)
    assert xid["action"] == "ISOLATE_RMA" and xid["details"]["gpu_uuid"] == uuid3
    missing = imagectl_in_process("validate", "--history", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "nope" in flat(missing.stderr)


def test_previous_boot_skips_this_boots_own_receipt(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_receipt("A", "2026-11-19T01:00", 64, "G", 0)))
    (tmp_path / "b.json").write_text(json.dumps(_receipt("B", "2026-11-20T01:00", 64, "H", 0)))
    receipts, bad = read_folder(tmp_path)
    assert bad == []
    prev = previous_boot(receipts, current_boot_id="B")
    assert prev is not None and prev.boot_id == "A" and prev.had(64, "G", None)
    assert not prev.had(64, "H", "0000:3b:00") and not prev.had(79, "G", None)


def test_dmesg_ctime_stamps_and_unnamed_processes() -> None:
    xid = "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp"
    text = f"[Fri Aug 30 11:43:09 2024] {xid}\n[Sat Aug 31 09:00:00 2024] {xid}\n"
    booted_at = 1_725_000_000.0  # 2024-08-30T06:40:00Z: both lines are of this boot
    (event,) = parse_events(current_boot(text, booted_at)[0])
    assert event.processes == [] and event.incidents == 2  # no pid: one per second
    one_crash = "".join(f"[  812.{i}] {xid} (GPC 7, TPC {i}, SM 0)\n" for i in range(5))
    (event,) = parse_events(one_crash)
    assert event.count == 5 and event.incidents == 1
    later = 1_725_080_000.0  # 2024-08-31T04:53:20Z: the first line is of an earlier boot
    (event,) = parse_events(current_boot(text, later)[0])
    assert event.count == 1


def test_xid43_is_the_applications_and_never_fails() -> None:
    entry = xid_catalog().lookup("xid", 43)
    assert entry.ignore and entry.app and entry.action == Action.NONE
