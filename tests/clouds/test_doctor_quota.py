"""The doctor's quota check is written once (``imagectl.doctor.quota``) and each cloud
supplies only its reader, registered through its spec (``CloudSpec.doctor_module``:
``clouds/<cloud>/doctor.py``; issue 46, item 1). The loop's outcomes are driven here
through the shipped quotas.yaml entries with a reader standing in for a cloud's answer;
the clouds' readers against their SDKs' emulators are in test_doctor.py."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from imagectl.clouds.account import cloud_checks
from imagectl.clouds.registry import specs
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.quota import Quota, quota_findings

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"


def test_every_remote_cloud_registers_its_doctor_from_its_folder() -> None:
    for name, spec in specs().items():
        checks = cloud_checks(name)
        if not spec.remote:
            assert checks is None and spec.doctor_module == ""
            continue
        assert spec.doctor_module == f"imagectl.clouds.{name}.doctor"
        assert checks is importlib.import_module(spec.doctor_module)
        assert callable(checks.diagnose) and isinstance(checks.ENDPOINT_ENV, tuple)
    assert not list((ROOT / "pipeline" / "doctor").glob("aws.py"))
    assert {p.stem for p in (ROOT / "pipeline" / "doctor").glob("*.py")} == {
        "__init__", "findings", "needs", "offline", "quota", "run",
    }  # fmt: skip


def test_no_cloud_loops_over_its_shapes_quotas_itself() -> None:
    """A cloud's doctor reads one quota; the loop over the validation shapes, the missing
    quotas.yaml entry and the comparison are the one in imagectl.doctor.quota."""
    for name, spec in specs().items():
        if not spec.doctor_module:
            continue
        path = ROOT / "pipeline" / "clouds" / name / "doctor.py"
        tree = ast.parse(path.read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "imagectl.doctor.needs"
            for alias in node.names
        }
        assert "quota" not in imported, path
        assert "no quota known" not in path.read_text(), path
        assert "quota_findings" in path.read_text(), path


def _reader(answers: dict[str, Quota | Finding]):
    def read(entry: Mapping[str, Any], hosts: int) -> Quota | Finding:
        key = str(entry.get("quota_code") or entry.get("metric") or entry.get("family"))
        return answers[key]

    return read


def test_short_enough_unknown_and_unread_quotas() -> None:
    short = Quota("NVIDIA_H100_GPUS in us-central1", 16, 8.0, "ask for more", limit=8.0)
    enough = Quota("Running On-Demand P instances (L-417A185B) in us-east-1", 192, 384.0,
                   "ask", unit=" vCPUs")  # fmt: skip
    found = quota_findings(
        IMAGES, ["a3-highgpu-8g", "p5.48xlarge", "no-such-shape"], 2,
        _reader({"NVIDIA_H100_GPUS": short, "L-417A185B": enough}),
    )  # fmt: skip
    assert [(f.status, f.message) for f in found] == [
        (BLOCKER, "NVIDIA_H100_GPUS in us-central1: 8 free of 8; 2 x a3-highgpu-8g needs 16"),
        (OK, "Running On-Demand P instances (L-417A185B) in us-east-1: 384 vCPUs >= 192"),
        (WARNING, "no quota known for no-such-shape"),
    ]
    assert found[0].fix == "ask for more" and found[2].fix.endswith("quotas.yaml")


def test_a_quota_the_cloud_cannot_read_is_said_once() -> None:
    unread = Finding("quota", WARNING, "cannot read us-central1's quotas (regions.get): 403")
    read = _reader({"NVIDIA_H100_GPUS": unread, "NVIDIA_A100_80GB_GPUS": unread})
    found = quota_findings(IMAGES, ["a3-highgpu-8g", "a2-ultragpu-8g"], 1, read)
    assert found == [unread]


def test_a_value_only_quota_says_its_value() -> None:
    q = Quota("Running On-Demand P instances (L-417A185B) in us-east-1", 192, 96.0, "raise it",
              unit=" vCPUs")  # fmt: skip
    (f,) = quota_findings(IMAGES, ["p5.48xlarge"], 1, _reader({"L-417A185B": q}))
    assert f.status == BLOCKER and f.fix == "raise it"
    assert f.message.endswith("L-417A185B) in us-east-1 is 96 vCPUs; 1 x p5.48xlarge needs 192")
