"""Kernel-log parsing (journal and dmesg formats) and the --kernel-log option."""

from __future__ import annotations

import json
from pathlib import Path

from validator_support import SNAPSHOTS, expect_file, imagectl_in_process

from imagectl.validators.catalogs import xid_catalog
from imagectl.validators.host.kernel_log import api_mismatch, normalise_bus, parse_events
from imagectl.validators.results import Action
from tests.support import flat

LOG = """\
[  812.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
[  812.123999] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
Nov 22 04:00:00 node kernel: NVRM: Xid (PCI:0000:9a:00): 63, pid='<unknown>', Row Remapper: New row marked
Nov 22 04:00:01 node kernel: nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 32
[  900.0] NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
"""  # noqa: E501 (real kernel-log lines)


def test_events_are_parsed_and_deduplicated() -> None:
    events = parse_events(LOG)
    assert [(e.kind, e.code, e.bus, e.count) for e in events] == [
        ("xid", 79, "0000:3b:00", 2),
        ("xid", 63, "0000:9a:00", 1),
        ("sxid", 12028, "0000:86:00", 1),
        ("xid", 154, "0000:18:00", 1),
    ]
    assert normalise_bus("00000000:3B:00.0") == normalise_bus("0000:3b:00") == "0000:3b:00"


def test_catalog_maps_codes_and_parses_xid154() -> None:
    cat = xid_catalog()
    assert cat.lookup("xid", 63).ignore and cat.lookup("xid", 92).ignore
    assert cat.lookup("xid", 79).action == Action.REBOOT
    assert not cat.lookup("xid", 999).known and cat.lookup("xid", 999).action == Action.RESET_GPU
    (e154,) = [e for e in parse_events(LOG) if e.code == 154]
    assert cat.action_from_text(e154.text) == Action.REBOOT
    for entry in [*cat.xids.values(), *cat.sxids.values()]:
        assert entry.source, entry.code


def test_api_mismatch_is_named() -> None:
    text = (
        "NVRM: API mismatch: the client has the version 580.95.05, but\n"
        "NVRM: this kernel module has the version 570.172.08.  Please make sure"
    )
    assert api_mismatch(text) == ("580.95.05", "570.172.08")


def test_kernel_log_file_replaces_the_snapshot_log(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("[ 5.0] NVRM: Xid (PCI:0000:18:00): 95, pid=1, Uncontained ECC error\n")
    out = imagectl_in_process(
        "validate",
        "--replay",
        str(SNAPSHOTS / "healthy/h100-sxm-8x.json"),
        "--expect",
        str(expect_file("h100-sxm-8x")),
        "--kernel-log",
        str(log),
        "--json",
    )
    assert out.returncode == 1, out.stderr
    (xid,) = [c for c in json.loads(out.stdout)["checks"] if c["id"] == "kernel.xid"]
    assert xid["action"] == "RESET_GPU" and xid["gpu"] == 0 and xid["measured"]["code"] == 95
    missing = imagectl_in_process("validate", "--kernel-log", str(tmp_path / "absent.log"))
    assert missing.returncode == 2 and "absent.log" in flat(missing.stderr)
