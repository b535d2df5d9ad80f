"""Xid 144-150 by NVIDIA's decode sheet ("XID 144-150 Decode" of the Xid Catalog
spreadsheet, validators/data/xid_nvlink5.yaml), not by the Fatal / Nonfatal word.

- Every row: a line carrying the row's IntrInfo (drivers before R575: the V1 pattern; R575
  and later: V2) and Error Status decodes to that row's resolution, whatever word it says.
- Through ``imagectl validate`` (kernel.xid): a RESET_GPU row fails RESET_GPU, a "Fatal" row
  NVIDIA says to ignore passes, a row marked RESET_GPU fails even worded Nonfatal, and a
  line no row matches falls back to its word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from validator_support import SNAPSHOTS, expect_file, imagectl_in_process

from imagectl.validators.catalogs import DATA, xid_catalog
from imagectl.validators.results import Action

ROWS = xid_catalog().nvlink5
ACTION = {"IGNORE": Action.NONE, "RESET_GPU": Action.RESET_GPU, "XID_154_EVAL": Action.NONE}
SHEET = "Xid-Catalog.xlsx 'XID 144-150 Decode'"


def _sample(pattern: str) -> int:
    """An IntrInfo the pattern selects: its set bits, '-' as 0."""
    return sum(1 << (31 - i) for i, ch in enumerate(pattern) if ch == "1")


def _word(severity: str) -> str:
    return "Nonfatal" if severity.lower().startswith("non") else "Fatal"


def _line(xid: int, unit: str, word: str, intrinfo: int, status: int) -> str:
    return f"{unit.split('/')[0]} {word} XC0 i0 Link 04 (0x{intrinfo:08x} 0x{status:08x} 0x0 0x0)"


def test_the_table_is_the_sheet() -> None:
    assert len(ROWS) == 94  # every row of the sheet as the spreadsheet carries it
    assert {r.xid for r in ROWS} == set(range(144, 151))
    for r in ROWS:
        assert r.source.startswith(SHEET) and f"Xid {r.xid} {r.unit}" in r.source
        assert r.resolution in ACTION and r.action == ACTION[r.resolution]
    assert "Xid-Catalog.xlsx" in (DATA / "xid_nvlink5.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("version", ["intrinfo_v1", "intrinfo_v2"])
def test_every_row_decodes_to_its_resolution(version: str) -> None:
    cat = xid_catalog()
    for r in ROWS:
        intrinfo = _sample(getattr(r, version))
        for word in ("Fatal", "Nonfatal"):  # the word never overrides the row
            row = cat.decode_nvlink5(r.xid, _line(r.xid, r.unit, word, intrinfo, r.error_status))
            assert row is not None, (r.xid, r.unit, hex(r.error_status))
            assert row.resolution == r.resolution, (r.xid, r.unit, hex(r.error_status), row)
        # another Xid's number with the same bits is not this row
        other = 150 if r.xid == 144 else 144
        row = cat.decode_nvlink5(other, _line(other, r.unit, "Fatal", intrinfo, r.error_status))
        assert row is None or row.xid == other


def _validate(tmp_path: Path, lines: list[tuple[str, int, str]]) -> dict[str, dict]:
    """kernel.xid of the healthy H100 host with these Xid lines (bus, code, text)."""
    log = tmp_path / "kern.log"
    log.write_text(
        "".join(
            f"2026-11-20T10:03:00+0000 h kernel: NVRM: Xid (PCI:0000:{bus}:00): {code}, {text}\n"
            for bus, code, text in lines
        ),
        encoding="utf-8",
    )
    out = imagectl_in_process(
        "validate", "--replay", str(SNAPSHOTS / "healthy" / "h100-sxm-8x.json"),
        "--expect", str(expect_file("h100-sxm-8x")), "--kernel-log", str(log), "--json",
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    found = [c for c in json.loads(out.stdout)["checks"] if c["id"] == "kernel.xid"]
    return {c["measured"]["device"]: c for c in found}


def test_kernel_xid_follows_the_decode_sheet(tmp_path: Path) -> None:
    got = _validate(
        tmp_path,
        [
            # sick: RLW_REMAP Error Status 0x40 is RESET_GPU (Fatal)
            ("18", 145, "RLW_REMAP Fatal XC0 i0 Link 03 (0x00000204 0x00000040 0x0 0x0)"),
            # healthy control: NETIR_LINK_EVT link-down reason 0x28 is 'Fatal' and IGNORE
            # (investigatory INVESTIGATE_HOST): the word alone reset this GPU
            ("2a", 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x02800011 0x00000000 0x0 0x0)"),
            # sick, worded Nonfatal: SAW_MVB Error Status 0x10 is RESET_GPU in the sheet
            ("3a", 144, "SAW_MVB Nonfatal XC0 i0 Link 01 (0x00000001 0x00000010 0x0 0x0)"),
            # healthy control: SAW_MVB Error Status 0x04 is IGNORE
            ("5d", 144, "SAW_MVB Nonfatal XC0 i0 Link 01 (0x00000001 0x00000004 0x0 0x0)"),
            # RLW_REMAP 0x01 is XID_154_EVAL: no action of its own (its Xid 154 decides)
            ("9a", 145, "RLW_REMAP Nonfatal XC0 i0 Link 02 (0x00000004 0x00000001 0x0 0x0)"),
            # no row (Error Status 0x400 is in none): the word decides, Fatal -> RESET_GPU
            ("ab", 146, "TLW_CTRL Fatal XC0 i0 Link 05 (0x00000009 0x00000400 0x0 0x0)"),
        ],
    )
    verdict = {bus[5:7]: (c["outcome"], c["action"]) for bus, c in got.items()}
    assert verdict == {
        "18": ("fail", "RESET_GPU"),
        "2a": ("pass", "NONE"),
        "3a": ("fail", "RESET_GPU"),
        "5d": ("pass", "NONE"),
        "9a": ("pass", "NONE"),
        "ab": ("fail", "RESET_GPU"),
    }
    (decoded,) = got["0000:2a:00"]["details"]["nvlink5_decode"]
    assert decoded["resolution"] == "IGNORE" and decoded["investigatory"] == "INVESTIGATE_HOST"
    assert SHEET in got["0000:18:00"]["source"]
    (fallback,) = got["0000:ab:00"]["details"]["nvlink5_decode"]
    assert fallback["resolution"] is None and "Fatal / Nonfatal word" in fallback["why"]
