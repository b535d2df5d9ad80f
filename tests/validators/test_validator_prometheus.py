"""Metrics on fleet nodes: the boot unit writes its result as Prometheus
text-format metrics for the node exporter's textfile collector, and the file is read back
with prometheus_client's own parser (``text_string_to_metric_families``), the reader the
exposition format is defined by.

The unit is rendered by Ansible from the validator role and its ``ExecStartPre`` /
``ExecStart`` lines are run as systemd runs them (``%b`` the boot id), against a replayed
host: one info series carries the image id, stack, shape and cloud, every other series is
joined to it by instance (base units in names, no unit label); failing checks
only, as ``imagectl_check_failed``; a GPU whose row remapping failed is, as NVIDIA's GPU
Memory Error Management says, one to replace (``ISOLATE_RMA``), in the metrics as in the
receipt."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from validator_support import SNAPSHOTS, expect_file

from tests.support import require_tool

prometheus_client = pytest.importorskip("prometheus_client.parser")
parse = prometheus_client.text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "playbooks" / "roles" / "validator"
UNIT = ROLE / "templates/etc/systemd/system/imagectl-boot-validate.service.j2"
HEALTHY = SNAPSHOTS / "healthy" / "h100-sxm-8x.json"
ROW_REMAP_FAILURE = SNAPSHOTS / "faults" / "h100-sxm-8x--row-remap-failure.json"
IMAGECTL = str(Path(sys.executable).with_name("imagectl"))
BOOT_ID = "0123456789abcdef0123456789abcdef"


def _render(tmp_path: Path, **extra: str) -> list[str]:
    playbook = require_tool("ansible-playbook")
    play, unit = tmp_path / "render.yml", tmp_path / "boot.service"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n"
        f"  vars_files: [{ROLE / 'defaults' / 'main.yml'}]\n"
        "  tasks:\n    - ansible.builtin.template:\n"
        f"        src: {UNIT}\n        dest: {unit}\n"
    )
    extra_args = [a for k, v in extra.items() for a in ("-e", f"{k}={v}")]
    proc = subprocess.run(
        [playbook, "-i", "localhost,", "-c",
         "local", "-e", f"ansible_python_interpreter={sys.executable}", *extra_args, str(play)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return unit.read_text().splitlines()


def _boot(tmp_path: Path, snapshot: Path) -> tuple[int, Path, dict]:
    """Render the unit for a node whose state and textfile folders are under tmp_path, then
    run its start commands as systemd would; the replayed snapshot stands in for the host."""
    prom = tmp_path / "textfile_collector" / "imagectl.prom"
    state = tmp_path / "state"
    lines = _render(
        tmp_path,
        validator_state_dir=str(state),
        validator_expect_file=str(expect_file("h100-sxm-8x")),
        validator_prometheus_file=str(prom),
    )
    starts = [ln.split("=", 1)[1] for ln in lines if ln.startswith(("ExecStartPre=", "ExecStart="))]
    code = 0
    for line in starts:
        argv = shlex.split(line.replace("%b", BOOT_ID))
        if argv[0].endswith("/bin/imagectl"):
            argv = [IMAGECTL, *argv[1:], "--replay", str(snapshot)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        code = proc.returncode
        assert code in (0, 1), proc.stderr
    receipt = json.loads((state / "boots" / f"{BOOT_ID}.json").read_text())
    return code, prom, receipt


def _samples(text: str) -> dict[str, list]:
    return {f.name: list(f.samples) for f in parse(text)}


def test_the_unit_writes_the_boot_result_as_metrics(tmp_path: Path) -> None:
    lines = _render(tmp_path)
    (start,) = [ln for ln in lines if ln.startswith("ExecStart=")]
    assert start.endswith("--prometheus /var/lib/node_exporter/textfile_collector/imagectl.prom")
    assert "ExecStartPre=/bin/rm -f /var/lib/node_exporter/textfile_collector/imagectl.prom" in (
        lines
    )  # a previous boot's result never stands for this boot's
    assert not any("--prometheus" in ln for ln in _render(tmp_path, validator_prometheus_file=""))


def test_a_healthy_node(tmp_path: Path) -> None:
    code, prom, receipt = _boot(tmp_path, HEALTHY)
    assert code == 0
    families = _samples(prom.read_text())
    (info,) = families["imagectl_node_info"]
    assert info.labels["image_id"] == receipt["image_id"] == "ami-0h100healthy0001"
    assert info.labels["stack"] == receipt["stack"] == "h100-training"
    assert (info.labels["shape"], info.labels["cloud"], info.value) == ("p5.48xlarge", "aws", 1)
    everything = [
        s for name, samples in families.items() for s in samples if name != "imagectl_node_info"
    ]
    for sample in everything:  # joined by instance: no image, stack or unit label anywhere else
        assert not {"image_id", "stack", "unit"} & set(sample.labels), sample
        assert set(sample.labels) <= {"gpu", "check"}, sample
    assert [s.value for s in families["imagectl_validation_passed"]] == [1.0]
    assert [s.value for s in families["imagectl_validation_worst_action"]] == [0.0]
    assert [s.value for s in families["imagectl_validation_failed_checks"]] == [0.0]
    assert "imagectl_check_failed" not in families  # failing checks only: none here
    (boot,) = families["imagectl_node_boot_timestamp_seconds"]
    assert boot.value == receipt["host"]["boot"]["booted_at"]
    (when,) = families["imagectl_validation_timestamp_seconds"]
    assert when.value > boot.value
    temps = {s.labels["gpu"]: s.value for s in families["imagectl_gpu_temperature_celsius"]}
    for c in receipt["checks"]:
        if c["id"] == "gpu.temperature":
            assert temps[str(c["gpu"])] == c["measured"]  # degrees Celsius, in the name
    assert {s.value for s in families["imagectl_gpu_power_limit_watts"]} == {700.0}
    assert len(families["imagectl_gpu_passed"]) == 8
    assert all(s.value == 1 for s in families["imagectl_gpu_passed"])
    # the textfile collector reads *.prom only: nothing else is left in its folder
    assert sorted(p.name for p in prom.parent.iterdir()) == ["imagectl.prom"]
    assert prom.stat().st_mode & 0o777 == 0o644


def test_a_gpu_whose_row_remapping_failed_is_one_to_replace(tmp_path: Path) -> None:
    code, prom, receipt = _boot(tmp_path, ROW_REMAP_FAILURE)
    assert code == 1
    failing = {(c["id"], "" if c["gpu"] is None else str(c["gpu"])) for c in receipt["checks"]
               if c["outcome"] in ("fail", "error")}  # fmt: skip
    (bad,) = [gpu for check, gpu in failing if check == "gpu.row_remap.failure"]
    families = _samples(prom.read_text())
    assert [s.value for s in families["imagectl_validation_passed"]] == [0.0]
    assert [s.value for s in families["imagectl_validation_worst_action"]] == [5.0]  # ISOLATE_RMA
    shown = {(s.labels["check"], s.labels["gpu"]) for s in families["imagectl_check_failed"]}
    assert shown == failing and ("gpu.row_remap.failure", bad) in shown
    assert all(s.value == 1 for s in families["imagectl_check_failed"])
    (count,) = families["imagectl_validation_failed_checks"]
    assert count.value == sum(1 for c in receipt["checks"] if c["outcome"] in ("fail", "error"))
    passed = {s.labels["gpu"]: s.value for s in families["imagectl_gpu_passed"]}
    assert passed[bad] == 0 and sum(passed.values()) == 7


@pytest.mark.parametrize(
    "image_id", ['ami-"quoted"', "ami-back\\slash", "ami-new\nline", 'a\\"b\\\\n\n}{,="']
)
def test_label_values_are_escaped(tmp_path: Path, image_id: str) -> None:
    prom = tmp_path / "imagectl.prom"
    proc = subprocess.run(
        [IMAGECTL, "validate", "--replay", str(HEALTHY), "--image-id", image_id,
         "--prometheus", str(prom), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (info,) = _samples(prom.read_text())["imagectl_node_info"]
    assert info.labels["image_id"] == image_id


def test_the_file_is_replaced_whole(tmp_path: Path) -> None:
    folder = tmp_path / "textfile_collector"
    folder.mkdir()
    prom = folder / "imagectl.prom"
    prom.write_text("# an older boot's result\nimagectl_stale 1\n")
    proc = subprocess.run(
        [IMAGECTL, "validate", "--replay", str(HEALTHY), "--prometheus", str(prom), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    names = {f.name for f in parse(prom.read_text())}
    assert "imagectl_stale" not in names and "imagectl_validation_passed" in names
    assert sorted(p.name for p in folder.iterdir()) == ["imagectl.prom"]
