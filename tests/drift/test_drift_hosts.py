"""Host drift: boot-check receipts from fleet nodes against their image's manifest.

Receipts are produced by the real validator (``imagectl validate --replay``) from the
shipped H100 snapshot and from copies of it where a node was changed behind the image's
back: an unattended driver upgrade that left the fabric manager behind (half-applied), a
kernel and NCCL upgrade. The manifest is what the image's manifest role writes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from drift_helpers import stack_report

from imagectl.validators.receipt import Receipt
from tests.support import make_receipt

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "tests" / "snapshots" / "healthy" / "h100-sxm-8x.json"


def manifest(snapshot: dict) -> dict:
    """/etc/imagectl/manifest.json of the image the snapshot's node booted from."""
    m = snapshot["host"]["manifest"]
    return {
        "schema_version": 1,
        "stack": m["stack"],
        "stack_digest": m["stack_digest"],
        "cloud": "aws",
        "kernel": snapshot["host"]["kernel_release"],
        "packages": m["packages"],
        "held": sorted(m["packages"]),
        "kernel_modules": "open",
        "nccl": snapshot["host"]["nccl"]["version"],
    }


def upgraded_driver(snap: dict, version: str) -> dict:
    snap = copy.deepcopy(snap)
    snap["nvml"]["system"]["nvmlSystemGetDriverVersion"] = version
    snap["nvml"]["system"]["nvmlSystemGetNVMLVersion"] = "13." + version
    snap["host"]["nvidia_module"]["version"] = version
    for name, pkg in snap["host"]["packages"].items():
        if name.startswith(("nvidia-driver-", "libnvidia-")):
            pkg["version"] = version + "-0ubuntu1"
    return snap


@pytest.fixture
def fleet_receipts(cli, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Receipts written by the real validator for three nodes, and the image's manifest."""
    healthy = json.loads(SNAPSHOT.read_text())
    kernel_nccl = copy.deepcopy(healthy)
    kernel_nccl["host"]["kernel_release"] = "6.8.0-1045-aws"
    kernel_nccl["host"]["nccl"]["version"] = "2.27.5"
    kernel_nccl["host"]["hostname"] = "node-kernel"
    half = upgraded_driver(healthy, "580.105.08")
    half["host"]["hostname"] = "node-half"
    hosts = tmp_path / "receipts"
    (hosts / "manifests").mkdir(parents=True)
    (hosts / "manifests" / "h100-training.json").write_text(json.dumps(manifest(healthy)))

    def receipt(name: str, snap: dict, image: str = "ami-0h100healthy0001") -> Path:
        src = tmp_path / f"{name}.snapshot.json"
        src.write_text(json.dumps(snap))
        out = hosts / f"{name}.json"
        result = cli(
            "validate",
            "--replay",
            str(src),
            "--stack",
            "h100-training",
            "--shape",
            "p5.48xlarge",
            "--image-id",
            image,
            "--no-hygiene",
            "-o",
            str(out),
        )
        assert out.is_file(), result.err
        return out

    receipt("node-ok", healthy)
    return hosts, receipt, {"kernel_nccl": kernel_nccl, "half": half}


def run(cli, hosts: Path, *extra: str):  # type: ignore[no-untyped-def]
    return cli(
        "--root",
        str(REPO),
        "drift",
        "--hosts",
        str(hosts),
        "--stack",
        "h100-training",
        "--format",
        "json",
        *extra,
    )


def test_node_matching_its_manifest_is_no_drift(cli, fleet_receipts):
    hosts, _receipt, _ = fleet_receipts
    result = run(cli, hosts)
    assert result.code == 0, result.out + result.err
    assert stack_report(result, "h100-training")["findings"] == []


def test_unattended_driver_upgrade_without_fabric_manager_is_half_applied(cli, fleet_receipts):
    hosts, receipt, snaps = fleet_receipts
    receipt("node-half", snaps["half"])
    result = run(cli, hosts)
    assert result.code == 1
    found = [f for f in stack_report(result, "h100-training")["findings"]]
    assert [(f["kind"], f["subject"]) for f in found] == [("host-driver-drift", "node-half")]
    (driver,) = found
    assert (driver["current"], driver["available"]) == ("580.95.05", "580.105.08")
    assert "half-applied" in driver["detail"] and "fabric manager" in driver["detail"]
    assert driver["extra"]["expected_from"].endswith("manifests/h100-training.json")


def test_kernel_and_nccl_moved_on_a_node(cli, fleet_receipts):
    hosts, receipt, snaps = fleet_receipts
    receipt("node-kernel", snaps["kernel_nccl"])
    result = run(cli, hosts, "--format", "markdown")
    assert result.code == 1
    assert "`host-kernel-drift`" in result.out and "6.8.0-1045-aws" in result.out
    assert "`host-nccl-drift`" in result.out and "2.27.5" in result.out
    assert "`host-driver-drift`" not in result.out


def test_without_a_manifest_the_current_stack_pins_are_expected(cli, fleet_receipts, tmp_path):
    hosts, receipt, snaps = fleet_receipts
    receipt("node-kernel", snaps["kernel_nccl"])
    for path in (hosts / "manifests").iterdir():
        path.unlink()
    result = run(cli, hosts)
    found = {f["kind"]: f for f in stack_report(result, "h100-training")["findings"]}
    assert found["host-kernel-drift"]["current"] == "6.8.0-1039-aws"  # clouds.aws.kernel
    assert found["host-kernel-drift"]["extra"]["expected_from"] == "stack h100-training pins"


def test_receipt_of_an_image_with_no_known_manifest(cli, fleet_receipts):
    hosts, _receipt, _ = fleet_receipts
    path = hosts / "node-ok.json"
    doc = json.loads(path.read_text())
    doc["stack_digest"] = "0" * 64
    path.write_text(json.dumps(doc))
    result = run(cli, hosts)
    (finding,) = stack_report(result, "h100-training")["findings"]
    assert finding["kind"] == "host-unknown-image" and finding["severity"] == "warning"
    assert result.code == 1


def test_a_corrupt_receipt_is_reported_and_skipped(cli, fleet_receipts):
    """One bad receipt in the fleet's folder must not stop the nightly check of the rest."""
    hosts, receipt, snaps = fleet_receipts
    receipt("node-kernel", snaps["kernel_nccl"])
    (hosts / "node-broken.json").write_text('{"image_id": "ami-1", "host": ')
    result = run(cli, hosts)
    assert result.code == 1, result.err
    found = {f["kind"]: f for f in stack_report(result, "h100-training")["findings"]}
    broken = found["host-receipt-unreadable"]
    assert broken["subject"].endswith("node-broken.json") and broken["severity"] == "warning"
    assert "not valid JSON" in broken["detail"]
    assert found["host-kernel-drift"]["subject"] == "node-kernel"  # the others still checked


def test_corrupt_manifest_is_bad_input(cli, fleet_receipts):
    hosts, _receipt, _ = fleet_receipts
    (hosts / "manifests" / "h100-training.json").write_text('{"stack": "h100-training"}')
    result = run(cli, hosts)
    assert result.code == 2
    assert "not an image manifest" in result.err


def test_receipts_from_the_catalog(cli, fleet_receipts, tmp_path, monkeypatch):
    """`--hosts catalog`: receipts stored for the stack's promoted images."""
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog
    from imagectl.stacks import load_resolved

    _hosts, receipt, snaps = fleet_receipts
    drifted = json.loads(receipt("node-kernel", snaps["kernel_nccl"]).read_text())
    db_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", db_url)
    digest = load_resolved(REPO / "images", "h100-training")[1].digest
    catalog = open_catalog(db_url)
    try:
        with catalog.transaction() as s:
            build = repo.record_build(s, build_id="b-1", stack="h100-training",
                                      stack_digest=digest, cloud="aws")  # fmt: skip
            row = repo.record_image(s, build=build, cloud_image_id="ami-0h100healthy0001",
                                    region="us-east-1")  # fmt: skip
            repo.set_state(s, row, "validating", reason="test")
            # a candidate's receipt names no host facts beyond its hostname: no drift
            candidate = make_receipt("ami-0h100healthy0001", "h100-training", digest)
            for host, body in (
                ("node-kernel", Receipt.model_validate(drifted)),
                ("candidate", candidate),
            ):
                repo.record_receipt(s, row, shape="p5.48xlarge", host=host,
                                    receipt=body)  # fmt: skip
            for state in ("validated", "promoting", "promoted"):
                repo.set_state(s, row, state, reason="test")
    finally:
        catalog.close()
    result = cli(
        "--root",
        str(REPO),
        "drift",
        "--hosts",
        "catalog",
        "--stack",
        "h100-training",
        "--format",
        "json",
    )
    assert result.code == 1, result.err
    found = {f["kind"]: f for f in stack_report(result, "h100-training")["findings"]}
    assert set(found) == {"host-kernel-drift", "host-nccl-drift"}
    assert found["host-kernel-drift"]["extra"]["receipt"].startswith("catalog:aws/us-east-1/")


def test_a_manifest_given_on_the_command_line_is_what_nodes_are_held_to(
    cli, fleet_receipts, tmp_path
):
    """``--manifest FILE``: a manifest outside the receipts folder is what a node is
    compared with; without it, the same node is held to the stack's pins."""
    hosts, receipt, snaps = fleet_receipts
    receipt("node-half", snaps["half"])
    given = tmp_path / "given-manifest.json"
    (hosts / "manifests" / "h100-training.json").rename(given)

    def expected_from(result) -> str:  # type: ignore[no-untyped-def]
        report = stack_report(result, "h100-training")
        (driver,) = [f for f in report["findings"] if f["kind"] == "host-driver-drift"]
        return str(driver["extra"]["expected_from"])

    assert expected_from(run(cli, hosts)) == "stack h100-training pins"
    assert expected_from(run(cli, hosts, "--manifest", str(given))) == str(given)
