"""The snapshot library: every fault fails with its check id and action, nothing else
fails, and every healthy or ignorable snapshot passes. Replayed through the same checks
that run live."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest
from validator_support import ROOT, SNAPSHOTS, expect_file, library_cases

from imagectl.validators.expectations import from_file
from imagectl.validators.session import Options, validate
from imagectl.validators.snapshot import load_snapshot

CASES = library_cases()
IMAGECTL = str(Path(sys.executable).parent / "imagectl")


@pytest.mark.parametrize("name", sorted(CASES))
def test_snapshot_verdict(name: str) -> None:
    case = CASES[name]
    receipt = validate(
        Options(
            profile=case["profile"],
            expect=from_file(
                SNAPSHOTS / case["expect"] if "expect" in case else expect_file(case["base"])
            ),
            snapshot=load_snapshot(SNAPSHOTS / name),
            snapshot_path=name,
        )
    )
    failing: dict[str, set[str]] = {}
    for c in receipt.checks:
        if c.failed:
            if c.outcome.value == "error":  # only where the rule says error (a missing toolkit)
                assert c.id in case["expect_fail"], f"{c.id}: unexpected error: {c.message}"
            if c.details.get("root_cause") == "nvml.init":
                continue  # not checked because NVML is down: the init failure names why
            failing.setdefault(c.id, set()).add(c.action.value)
    expected = {k: {v} for k, v in case["expect_fail"].items()}
    assert failing == expected
    warned = {c.id for c in receipt.checks if c.outcome.value == "warn"}
    assert set(case["expect_warn"]) <= warned, f"must warn: {case['expect_warn']}"
    for c in receipt.checks:
        if c.id == "kernel.xid" and c.measured:
            assert c.gpu is not None, "an XID must be attributed to its GPU by PCI address"
    assert receipt.verdict == case["verdict"], [c for c in receipt.checks if c.failed]
    assert receipt.worst_action.value == case["worst_action"]


def test_every_case_names_its_source() -> None:
    for name, case in CASES.items():
        assert case["source"].strip(), f"{name}: cite the rule's source"
        assert case["verdict"] == ("fail" if case["expect_fail"] else "pass"), name


def test_library_covers_the_required_faults() -> None:
    faults = {c["fault"] for c in CASES.values() if c["expect_fail"]}
    assert len(faults) >= 20
    required = {
        "xid79-fallen-off-bus",
        "xid48-row-remap-pending",
        "row-remap-failure",
        "ecc-volatile-uncorrected",
        "ecc-disabled",
        "ecc-pending-mode-change",
        "hw-slowdown",
        "hw-thermal-slowdown",
        "temperature-over-slowdown",
        "pcie-gen3-x8",
        "gpu-missing-7-of-8",
        "nvlink-inactive",
        "fabric-manager-not-running",
        "fabric-manager-version-mismatch",
        "persistence-off",
        "driver-library-mismatch",
        "nvml-library-missing",
        "driver-not-loaded",
        "wrong-driver-version",
        "mig-enabled",
        "nccl-unpinned",
        # what the driver logs without an Xid, and Xid 154 by its latest line
        "fallen-off-bus-at-probe",
        "rm-init-adapter-failed",
        "rm-init-adapter-firmware-failed",
        "nvlink-core-training-failed",
        "nvswitch-init-failed",
        "xid154-latest-weaker",
        "nvl-power-capped-300w",
        # every GPU network judged: NCCL on GPUDirect-TCPXO and gIB, each NIC's link rate
        "a3mega-fastrak-ifname-half",
        "a3high-tcpx-ifname-half",
        "a3high-nccl-socket-fallback",
        "a3mega-nccl-socket-fallback",
        "a3ultra-nccl-socket-fallback",
        "a3ultra-nccl-builtin-ib",
        "a3ultra-roce-port-200g",
        "a3mega-gvnic-100g",
    }
    assert required <= faults
    healthy = {c["base"] for n, c in CASES.items() if n.startswith("healthy/")}
    assert healthy == {
        "h100-sxm-8x",
        "a100-sxm-80gb-8x",
        "h200-8x",
        "l4-1x",
        "h100-p5-efa",  # with its NICs: 32 EFA devices
        "h100-ndv5-ib",  # with its NICs: 8 NDR InfiniBand HCAs
        "a100-ndv4-ib",  # 8 HDR HCAs, each device in its own PCI domain (ndv4-topo.xml)
        "h200-p5en-efa",  # 16 EFA, two behind each GPU's switch
        "h100-a3mega-tcpxo",  # 8 gVNIC GPU NICs for GPUDirect-TCPXO + the primary
        "h100nvl-1x-fm-pinned",  # one H100 NVL, no NVSwitch, an image that pins FM
        "h200-a3ultra-roce",  # 8 ConnectX-7 RoCE NICs (gIB) + two gVNICs
        "h100-a3high-tcpx",  # 4 gVNIC GPU NICs for GPUDirect-TCPX, two GPUs each + the primary
    }
    ignorable = {c["fault"] for c in CASES.values() if c["fault"] and not c["expect_fail"]}
    assert {
        "xid63-row-remap-event",
        "xid92-high-sbe-rate",
        "sw-power-cap",
        "idle-clocks",
        "fallen-off-bus-at-probe-earlier-boot",
        "xid154-latest-clears",
        "nvl-power-350w-in-range",
        "nvl-power-350w-default-350w",
        "gpu-network-healthy-quick",
        "a3mega-primary-gvnic-slower",
    } <= ignorable


def test_library_is_reproducible(tmp_path: Path) -> None:
    """The committed JSON is exactly what the generator writes."""
    subprocess.run(
        [sys.executable, str(SNAPSHOTS / "make_snapshots.py"), "--out", str(tmp_path)],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    for name in [
        *CASES,
        "cases.json",
        *(f"expect/{b}.json" for b in {c["base"] for c in CASES.values()}),
        *(c["expect"] for c in CASES.values() if "expect" in c),
    ]:
        assert filecmp.cmp(tmp_path / name, SNAPSHOTS / name, shallow=False), name


def test_healthy_h100_passes_against_the_real_stack() -> None:
    """Expectations from images/stacks/h100-training.yaml + the shape table, not a file."""
    out = subprocess.run(
        [
            IMAGECTL,
            "validate",
            "--replay",
            str(SNAPSHOTS / "healthy/h100-sxm-8x.json"),
            "--stack",
            "h100-training",
            "--shape",
            "p5.48xlarge",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    receipt = json.loads(out.stdout)
    assert receipt["stack"] == "h100-training" and receipt["verdict"] == "pass"
    assert receipt["image_id"] == "ami-0h100healthy0001"
    assert len(receipt["gpus"]) == 8 and all(g["outcome"] == "pass" for g in receipt["gpus"])
    ids = {c["id"] for c in receipt["checks"] if c["outcome"] == "pass"}
    assert {
        "sw.driver.version",
        "sw.nccl.version",
        "sw.fabricmanager.version",
        "gpu.fabric.state",
        "sw.packages.pinned",
        "sw.manifest.agrees",
    } <= ids


def test_replay_without_expectations_uses_the_recorded_expect_json() -> None:
    """A shared snapshot is judged as the host judged itself: no --expect needed."""
    from validator_support import imagectl_in_process

    fault = SNAPSHOTS / "faults/h100-sxm-8x--nccl-unpinned.json"
    out = imagectl_in_process("validate", "--replay", str(fault), "--json")
    assert out.returncode == 1, out.stderr
    receipt = json.loads(out.stdout)
    assert receipt["expectations"]["origin"] == "snapshot:/etc/imagectl/expect.json"
    failing = {c["id"] for c in receipt["checks"] if c["outcome"] == "fail"}
    assert failing == set(CASES["faults/h100-sxm-8x--nccl-unpinned.json"]["expect_fail"])


def test_library_snapshots_follow_the_shipped_schema() -> None:
    import jsonschema

    from imagectl.validators.snapshot import SCHEMA_FILE

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    for name in CASES:
        errors = list(validator.iter_errors(json.loads((SNAPSHOTS / name).read_text())))
        assert not errors, (name, errors[0].message)
