"""Receipts: schema, JUnit, ``receipt show`` / ``receipt diff``, corrupt inputs -> exit 2.
Driven through the real CLI in a subprocess."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from validator_support import SNAPSHOTS, Run, expect_file, imagectl_in_process

from imagectl.core.errors import UserError
from imagectl.validators.receipt import SCHEMA_FILE, load_receipt
from imagectl.validators.schemas import SCHEMA_DIR, generators, render
from tests.support import flat

IMAGECTL = str(Path(sys.executable).parent / "imagectl")
HEALTHY = SNAPSHOTS / "healthy/h100-sxm-8x.json"
XID79 = SNAPSHOTS / "faults/h100-sxm-8x--xid79-fallen-off-bus.json"


def imagectl(*args: str) -> Run:
    return imagectl_in_process(*args)


@pytest.fixture(scope="module")
def receipts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("receipts")
    exp = str(expect_file("h100-sxm-8x"))
    good = imagectl(
        "validate",
        "--replay",
        str(HEALTHY),
        "--expect",
        exp,
        "-o",
        str(out / "good.json"),
        "--junit",
        str(out / "good.xml"),
        "--json",
    )
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr
    bad = imagectl(
        "validate",
        "--replay",
        str(XID79),
        "--expect",
        exp,
        "-o",
        str(out / "bad.json"),
        "--junit",
        str(out / "bad.xml"),
        "--json",
    )
    assert bad.returncode == 1, bad.stdout[-3000:] + bad.stderr
    return {
        "good": out / "good.json",
        "bad": out / "bad.json",
        "good_xml": out / "good.xml",
        "bad_xml": out / "bad.xml",
    }


def test_shipped_schemas_match_their_models() -> None:
    for name, make in generators().items():
        assert (SCHEMA_DIR / name).read_text() == render(make()), (
            f"{name} is stale: run python -m imagectl.validators.schemas"
        )


def test_receipts_validate_against_the_shipped_schema(receipts: dict[str, Path]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    for key in ("good", "bad"):
        data = json.loads(receipts[key].read_text())
        jsonschema.validate(data, schema)
    bad = json.loads(receipts["bad"].read_text())
    assert bad["verdict"] == "fail" and bad["worst_action"] == "REBOOT"
    assert bad["image_id"] == "ami-0h100healthy0001" and bad["mode"] == "replay"
    assert bad["stack"] == "h100-training" and len(bad["stack_digest"]) == 64
    (xid,) = [c for c in bad["checks"] if c["id"] == "kernel.xid"]
    assert xid["gpu"] == 3 and xid["action"] == "REBOOT" and xid["measured"]["code"] == 79
    assert bad["gpus"][3]["outcome"] == "fail" and bad["gpus"][3]["failed_checks"] == ["kernel.xid"]
    for c in bad["checks"]:
        assert {
            "id",
            "title",
            "severity",
            "outcome",
            "measured",
            "expected",
            "unit",
            "source",
            "action",
            "duration_s",
        } <= set(c)


def test_junit_parses_and_counts_failures(receipts: dict[str, Path]) -> None:
    for key, failures in (("good_xml", 0), ("bad_xml", 1)):
        root = ET.parse(receipts[key]).getroot()
        suite = root.find("testsuite")
        assert suite is not None and int(suite.get("failures", "-1")) == failures
        assert len(suite.findall("testcase")) == int(suite.get("tests", "0")) > 100
    root = ET.parse(receipts["bad_xml"]).getroot()
    failed = [tc.get("name") for tc in root.iter("testcase") if tc.find("failure") is not None]
    assert failed == ["kernel.xid[gpu3][79]"]


def test_receipt_show_and_diff(receipts: dict[str, Path]) -> None:
    shown = imagectl("receipt", "show", str(receipts["bad"]), "--json")
    assert shown.returncode == 1 and json.loads(shown.stdout)["verdict"] == "fail"
    table = imagectl("receipt", "show", str(receipts["bad"]))
    assert table.returncode == 1
    assert "kernel.xid" in flat(table.stdout) and "verdict: FAIL" in flat(table.stdout)
    assert "gpu.ecc.mode" not in flat(table.stdout)  # passed checks hidden unless --all
    full = imagectl("receipt", "show", str(receipts["bad"]), "--all")
    assert "gpu.ecc.mode" in flat(full.stdout)
    assert imagectl("receipt", "show", str(receipts["good"]), "--json").returncode == 0
    diff = imagectl("receipt", "diff", str(receipts["good"]), str(receipts["bad"]), "--json")
    assert diff.returncode == 1
    d = json.loads(diff.stdout)
    assert d["header"]["verdict"] == {"a": "pass", "b": "fail"}
    changed = {(c["id"], c["gpu"]) for c in d["checks"]}
    assert ("kernel.xid", None) in changed or ("kernel.xid", 3) in changed
    same = imagectl("receipt", "diff", str(receipts["good"]), str(receipts["good"]))
    assert same.returncode == 0 and "no check changed" in flat(same.stdout)


@pytest.mark.parametrize("kind", ["receipt", "snapshot"])
def test_corrupt_or_truncated_input_is_exit_2(
    kind: str, receipts: dict[str, Path], tmp_path: Path
) -> None:
    source = receipts["good"] if kind == "receipt" else HEALTHY
    text = source.read_text()
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema_version": 1, "hello": "world"}))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    for path in (truncated, wrong, binary, tmp_path / "absent.json"):
        if kind == "receipt":
            out = imagectl("receipt", "show", str(path))
        else:
            out = imagectl("validate", "--replay", str(path))
        assert out.returncode == 2, (path, out.stdout, out.stderr)
        assert "error:" in flat(out.stderr) and "Traceback" not in flat(out.stderr)
        assert path.name in out.stderr
    if kind == "receipt":
        with pytest.raises(UserError, match="corrupt or truncated"):
            load_receipt(truncated)


def test_bad_options_are_exit_2(tmp_path: Path) -> None:
    assert imagectl("validate", "--replay", str(HEALTHY), "--shape", "p99.huge").returncode == 2
    assert (
        imagectl("validate", "--replay", str(HEALTHY), "--stack", "h100-training").returncode == 2
    )
    bad_expect = tmp_path / "expect.json"
    bad_expect.write_text('{"gpu_count": "eight"}')
    out = imagectl("validate", "--replay", str(HEALTHY), "--expect", str(bad_expect))
    assert out.returncode == 2 and "gpu_count" in flat(out.stderr)
    bad_expect.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    out = imagectl("validate", "--replay", str(HEALTHY), "--expect", str(bad_expect))
    assert out.returncode == 2 and "Traceback" not in flat(out.stderr), out.stderr
    assert "expect.json" in flat(out.stderr) and "not UTF-8" in flat(out.stderr)


def test_snapshot_records_previous_boots_for_replay(tmp_path) -> None:
    """``imagectl snapshot --history DIR`` keeps what the XID recurrence rule reads from the
    previous boots' receipts (boot, GPUs, kernel.xid results), nothing else of them."""
    import subprocess

    from imagectl.validators.expectations import from_file
    from imagectl.validators.receipt import write_receipt
    from imagectl.validators.session import Options, validate
    from imagectl.validators.snapshot import load_snapshot

    name = "faults/h100-sxm-8x--xid79-fallen-off-bus.json"
    earlier = validate(
        Options(
            expect=from_file(expect_file("h100-sxm-8x")),
            snapshot=load_snapshot(SNAPSHOTS / name),
            snapshot_path=name,
        )
    )
    boots = tmp_path / "boots"
    write_receipt(earlier, boots / "previous-boot.json")
    out = tmp_path / "snap.json"
    run = subprocess.run(
        [str(Path(sys.executable).parent / "imagectl"), "snapshot", "-o", str(out),
         "--history", str(boots), "--hygiene-root", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (recorded,) = json.loads(out.read_text())["host"]["boot_history"]
    assert {c["id"] for c in recorded["checks"]} == {"kernel.xid"}
    assert any(c["outcome"] == "fail" for c in recorded["checks"])
    assert recorded["host"]["boot"] == earlier.host["boot"]
    assert [g["uuid"] for g in recorded["gpus"]] == [g.uuid for g in earlier.gpus]
    missing = subprocess.run(
        [str(Path(sys.executable).parent / "imagectl"), "snapshot", "-o", str(out),
         "--history", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and "no such folder" in flat(missing.stderr)
