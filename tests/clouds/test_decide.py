"""The decision rules (pure), fed with receipts the real validator wrote from snapshots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.validation.decide import BLOCKED, HOST_PROBLEM, INCONCLUSIVE, VALIDATED, decide
from imagectl.validation.receipts import HostOutcome, ReceiptRejected, bind, load_bound
from imagectl.validators.receipt import load_receipt
from tests.clouds.scenario import HARDWARE_FAULT, HEALTHY, IMAGE_FAULT

IMAGE = "ami-0123456789abcdef0"


@pytest.fixture(scope="session")
def receipts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Receipts of the real validator replaying a healthy host, a host with XID 79 (fell
    off the bus: hardware) and an image with the wrong driver (image-level)."""
    folder = tmp_path_factory.mktemp("receipts")
    root = folder / "empty-root"
    root.mkdir()
    imagectl = str(Path(sys.executable).parent / "imagectl")
    out = {}
    for name, snapshot in (
        ("healthy", HEALTHY),
        ("hardware", HARDWARE_FAULT),
        ("image", IMAGE_FAULT),
    ):
        path = folder / f"{name}.json"
        proc = subprocess.run(
            [
                imagectl,
                "validate",
                "--replay",
                str(snapshot),
                "--stack",
                "h100-training",
                "--shape",
                "p5.48xlarge",
                "--image-id",
                IMAGE,
                "--hygiene-root",
                str(root),
                "-o",
                str(path),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode in (0, 1), proc.stderr
        out[name] = path
    return out


def _digest(path: Path) -> str:
    return str(json.loads(path.read_text())["stack_digest"])


def _host(receipts: dict[str, Path], kind: str, host: str) -> HostOutcome:
    return load_bound(
        receipts[kind],
        host=host,
        instance_id=host,
        slot=0,
        image_id=IMAGE,
        stack_digest=_digest(receipts[kind]),
    )


def test_all_hosts_pass_is_validated(receipts: dict[str, Path]) -> None:
    d = decide([_host(receipts, "healthy", "a"), _host(receipts, "healthy", "b")])
    assert d.verdict == VALIDATED


def test_the_same_image_fault_on_every_host_blocks_with_reasons(receipts: dict[str, Path]) -> None:
    d = decide([_host(receipts, "image", "a"), _host(receipts, "image", "b")])
    assert d.verdict == BLOCKED
    assert any(r.startswith("sw.driver.version: ") for r in d.reasons)
    assert d.retry_hosts == []


def test_a_single_host_with_an_image_fault_blocks(receipts: dict[str, Path]) -> None:
    assert decide([_host(receipts, "image", "a")]).verdict == BLOCKED


def test_a_hardware_fault_on_one_host_is_a_host_problem(receipts: dict[str, Path]) -> None:
    d = decide([_host(receipts, "healthy", "a"), _host(receipts, "hardware", "b")])
    assert d.verdict == HOST_PROBLEM
    assert d.retry_hosts == ["b"]
    assert d.bad_hosts[0].hardware == ("kernel.xid",)
    assert d.bad_hosts[0].image_level == ()


def test_a_hardware_fault_on_every_host_is_still_not_a_block(receipts: dict[str, Path]) -> None:
    d = decide([_host(receipts, "hardware", "a"), _host(receipts, "hardware", "b")])
    assert d.verdict == HOST_PROBLEM
    assert d.retry_hosts == ["a", "b"]


def test_an_image_fault_on_some_hosts_only_is_retried_not_blocked(
    receipts: dict[str, Path],
) -> None:
    d = decide([_host(receipts, "healthy", "a"), _host(receipts, "image", "b")])
    assert d.verdict == HOST_PROBLEM
    assert d.retry_hosts == ["b"]


def test_a_missing_receipt_is_inconclusive_even_if_the_others_pass(
    receipts: dict[str, Path],
) -> None:
    d = decide([_host(receipts, "healthy", "a"), HostOutcome("b", problem="host unreachable")])
    assert d.verdict == INCONCLUSIVE
    assert d.reasons == ["b: host unreachable"]


def test_a_missing_receipt_prevents_a_block(receipts: dict[str, Path]) -> None:
    d = decide([_host(receipts, "image", "a"), HostOutcome("b", problem="validator crashed")])
    assert d.verdict == INCONCLUSIVE


def test_no_hosts_is_inconclusive() -> None:
    assert decide([]).verdict == INCONCLUSIVE


def test_receipt_for_another_image_is_rejected(receipts: dict[str, Path]) -> None:
    outcome = load_bound(
        receipts["healthy"],
        host="a",
        instance_id="a",
        slot=0,
        image_id="ami-other",
        stack_digest=_digest(receipts["healthy"]),
    )
    assert outcome.receipt is None
    assert outcome.problem is not None and "receipt rejected" in outcome.problem
    assert decide([outcome]).verdict == INCONCLUSIVE


def test_receipt_for_another_stack_digest_is_rejected(receipts: dict[str, Path]) -> None:
    receipt = load_receipt(receipts["healthy"])
    with pytest.raises(ReceiptRejected, match="stack digest"):
        bind(receipt, image_id=IMAGE, stack_digest="0" * 64)
    assert receipt.stack_digest is not None
    assert bind(receipt, image_id=IMAGE, stack_digest=receipt.stack_digest) is receipt


def test_corrupt_receipt_counts_as_none(receipts: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "r.json"
    broken.write_text(receipts["healthy"].read_text()[:300])
    outcome = load_bound(
        broken, host="a", instance_id="a", slot=0, image_id=IMAGE, stack_digest="x"
    )
    assert outcome.receipt is None and "unreadable" in (outcome.problem or "")
