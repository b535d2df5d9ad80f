"""Hostile JSON documents (receipts, snapshots, fleet boot receipts): exit 2 with the file
named, never a traceback (RecursionError, "Exceeds the limit for integer string
conversion") or a hang; in ``drift --hosts`` one bad receipt is reported and skipped."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import REPO

SNAPSHOT = REPO / "tests" / "snapshots" / "healthy" / "h100-sxm-8x.json"

DOCS: dict[str, tuple[Callable[[], bytes], str]] = {
    "deep-array": (lambda: b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
    "deep-object": (lambda: b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested too deep"),
    "huge-integer": (lambda: b'{"schema_version": ' + b"9" * 100_000 + b"}", "digits long"),
    "not-utf8": (lambda: b'{"host": "caf\xe9"}', "not UTF-8"),
    "truncated": (lambda: b'{"image_id": "ami-1", "host": ', "not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(DOCS))
def test_receipt_show_and_replay_refuse_hostile_json(case: str, tmp_path: Path, hostile) -> None:
    make, expected = DOCS[case]
    path = tmp_path / f"{case}.json"
    path.write_bytes(make())
    for args in (
        ("receipt", "show", str(path)),
        ("receipt", "diff", str(path), str(path)),
        ("validate", "--replay", str(path), "--profile", "boot", "--no-hygiene"),
    ):
        res = hostile(*args, timeout=30)
        assert str(path) in res.text and expected in res.text, res.text


def test_a_receipt_linked_to_dev_zero_is_refused(tmp_path: Path, hostile) -> None:
    path = tmp_path / "zero.json"
    os.symlink("/dev/zero", path)
    res = hostile("receipt", "show", str(path), timeout=30)
    assert str(path) in res.text and ("larger than" in res.text or "not UTF-8" in res.text)


def test_one_bad_fleet_receipt_does_not_stop_drift(tmp_path: Path, cli, hostile) -> None:
    hosts = tmp_path / "receipts"
    hosts.mkdir()
    snap = tmp_path / "snap.json"
    snap.write_text(SNAPSHOT.read_text())
    made = cli(
        "validate", "--replay", str(snap), "--stack", "h100-training", "--shape", "p5.48xlarge",
        "--image-id", "ami-0h100healthy0001", "--no-hygiene", "-o", str(hosts / "node-ok.json"),
    )  # fmt: skip
    assert (hosts / "node-ok.json").is_file(), made.err
    for case in ("deep-array", "huge-integer"):
        (hosts / f"{case}.json").write_bytes(DOCS[case][0]())
    res = hostile(
        "--root", str(REPO), "drift", "--hosts", str(hosts), "--stack", "h100-training",
        "--format", "json", code=None, timeout=60,
    )  # fmt: skip
    assert res.code == 1, res.err  # reported (a warning), not bad input and not a crash
    (stack,) = [s for s in json.loads(res.out)["stacks"] if s["stack"] == "h100-training"]
    skipped = {
        Path(f["subject"]).name: f["detail"]
        for f in stack["findings"]
        if f["kind"] == "host-receipt-unreadable"
    }
    assert set(skipped) == {"deep-array.json", "huge-integer.json"}
    assert "nested too deep" in skipped["deep-array.json"]
