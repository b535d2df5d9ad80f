"""The typed image manifest: what write-manifest.py records from ground truth, and how the
validator (sw.manifest.agrees) and drift read it, schema 2 and older schema-1 manifests."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from validator_support import ROOT

from imagectl.core.errors import UserError
from imagectl.drift.receipts import manifest_facts
from imagectl.validators.checks import specs_for
from imagectl.validators.expectations import from_file
from imagectl.validators.manifest import parse_manifest
from imagectl.validators.results import Action
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context

SNAPSHOTS = ROOT / "tests" / "snapshots"
WRITER = ROOT / "playbooks" / "roles" / "manifest" / "files" / "write-manifest.py"


def _healthy() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SNAPSHOTS / "healthy" / "h100-sxm-8x.json").read_text())
    return data


def _agrees(snapshot: dict[str, Any]) -> Any:
    ctx = build_context(
        Options(expect=from_file(SNAPSHOTS / "expect" / "h100-sxm-8x.json"), snapshot=snapshot)
    )
    specs = [s for s in specs_for("boot") if s.id == "sw.manifest.agrees"]
    [result] = run_checks(specs, ctx)
    return result


def test_a_healthy_schema_2_manifest_agrees() -> None:
    snap = _healthy()
    assert snap["host"]["manifest"]["schema_version"] == 2
    result = _agrees(snap)
    assert result.outcome.value == "pass", result.message


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("driver", "570.172.08", "driver"),  # an image built with another driver
        ("kernel_modules", "proprietary", "kernel_modules"),
        ("cuda", "12.9.1-1", "cuda"),
        ("nccl", "2.21.5", "nccl"),
        ("dcgm", "1:3.3.9-1", "dcgm"),
    ],
)
def test_a_manifest_naming_other_versions_than_the_pins_blocks(
    field: str, value: str, named: str
) -> None:
    snap = _healthy()
    snap["host"]["manifest"][field] = value
    result = _agrees(snap)
    assert result.outcome.value == "fail" and result.action == Action.BLOCK_IMAGE
    assert named in result.measured, result.measured


def test_an_older_manifest_reads_the_driver_from_its_package_names() -> None:
    snap = _healthy()
    m = snap["host"]["manifest"]
    old = {k: m[k] for k in ("image_id", "stack", "stack_digest", "packages")}
    snap["host"]["manifest"] = {"schema_version": 1, **old}
    assert parse_manifest(snap["host"]["manifest"]).driver_version == "580.95.05-0ubuntu1"
    assert _agrees(snap).outcome.value == "pass"
    facts = manifest_facts(snap["host"]["manifest"], "old.json")
    assert (facts.driver, facts.fabric_manager) == ("580.95.05", "580.95.05")


def test_a_wrongly_typed_manifest_is_named_not_crashed_on() -> None:
    snap = _healthy()
    snap["host"]["manifest"]["driver"] = 580
    result = _agrees(snap)
    assert result.action == Action.BLOCK_IMAGE
    assert "not an image manifest: driver" in result.message
    with pytest.raises(UserError, match="m.json: not an image manifest: driver"):
        manifest_facts(snap["host"]["manifest"], "m.json")


def test_drift_takes_the_manifest_s_fields_over_package_names() -> None:
    m = copy.deepcopy(_healthy()["host"]["manifest"])
    m["driver"] = "580.95.06"  # the module the image really carries
    assert manifest_facts(m, "m.json").driver == "580.95.06"


def _stand_in(bin_dir: Path, name: str, body: str) -> None:
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)


def test_the_writer_records_each_component_from_dpkg_and_modinfo(tmp_path: Path) -> None:
    """write-manifest.py with dpkg-query and modinfo standing in as the image has them
    (formats: dpkg-query(1) -W -f, modinfo(8) -F)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rows = [
        ("ii ", "nvidia-driver-580-open", "580.95.05-0ubuntu1"),
        ("hi ", "nvidia-fabricmanager-580", "580.95.05-1"),
        ("hi ", "cuda-toolkit-12-8", "12.8.1-1"),
        ("hi ", "libnccl2", "2.26.2-1+cuda12.8"),
        ("hi ", "datacenter-gpu-manager-4-cuda12", "1:4.4.1-1"),
        ("hi ", "nvidia-container-toolkit", "1.18.0-1"),
        ("rc ", "cuda-toolkit-12-4", "12.4.1-1"),  # removed, config left: not installed
    ]
    listing = "".join(f"{s}\t{n}\t{v}\\n" for s, n, v in rows)
    _stand_in(
        bin_dir,
        "dpkg-query",
        f"case \"$*\" in *Status}}*) exit 0;; esac\nprintf '{listing}'\n",
    )
    _stand_in(
        bin_dir,
        "modinfo",
        'case "$*" in *version*) echo 580.95.05;; *license*) echo "Dual MIT/GPL";; esac\n',
    )
    components = {
        "driver": "nvidia-driver-580-open",
        "fabric_manager": "nvidia-fabricmanager-580",
        "cuda_toolkit": "cuda-toolkit-12-8",
        "nccl": "libnccl2",
        "dcgm": "datacenter-gpu-manager-4-cuda12",
        "container_toolkit": "nvidia-container-toolkit",
    }
    done = subprocess.run(
        [
            sys.executable,
            str(WRITER),
            "--stack",
            "h100-training",
            "--digest",
            "d" * 64,
            "--cloud",
            "aws",
            "--kernel",
            "6.8.0-1039-aws",
            "--validator-venv",
            str(tmp_path),
            "--pattern=nvidia-*",
            *(f"--component={k}={v}" for k, v in components.items()),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        check=True,
    )
    manifest = parse_manifest(json.loads(done.stdout))
    assert manifest.schema_version == 2
    assert (manifest.driver, manifest.kernel_modules) == ("580.95.05", "open")
    assert (manifest.cuda, manifest.dcgm) == ("12.8.1-1", "1:4.4.1-1")
    assert (manifest.fabric_manager, manifest.container_toolkit) == ("580.95.05-1", "1.18.0-1")
    assert manifest.nccl_version in ("2.26.2-1+cuda12.8", "2.26.2")  # ncclGetVersion if present
    assert "cuda-toolkit-12-4" not in manifest.packages
    # --output (how the role runs it: one command reads the image and writes the file):
    # the same document, whole, 0644, no temporary file left beside it
    out = tmp_path / "etc" / "manifest.json"
    out.parent.mkdir()
    argv = [a for a in done.args if a != "--nonce"]
    again = subprocess.run([*argv, "--output", str(out)], capture_output=True, text=True,
                           env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                           check=True)  # fmt: skip
    assert again.stdout == "changed\n"
    assert out.read_text() == done.stdout
    # the same state again: the file is left alone and the role hears "unchanged"
    third = subprocess.run([*argv, "--output", str(out)], capture_output=True, text=True,
                           env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                           check=True)  # fmt: skip
    assert third.stdout == "unchanged\n"
    assert out.stat().st_mode & 0o777 == 0o644 and [p.name for p in out.parent.iterdir()] == [
        "manifest.json"
    ]
