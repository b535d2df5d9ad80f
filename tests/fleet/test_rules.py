"""The recording and alerting rules the project ships (images/monitoring/), checked and
unit-tested by Prometheus's own ``promtool`` (Debian's ``prometheus`` package, installed by
.ci/install-system-deps): no mock of PromQL. Missing locally: skipped; under CI=true: a
failure."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support import flat, require_tool

MONITORING = Path(__file__).resolve().parents[2] / "images" / "monitoring"
RULES = MONITORING / "prometheus-rules.yaml"
TESTS = MONITORING / "prometheus-rules.test.yaml"


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = require_tool("promtool")
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_check_rules() -> None:
    proc = _promtool("check", "rules", RULES.name, cwd=MONITORING)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in flat(proc.stdout)


def test_promtool_test_rules() -> None:
    proc = _promtool("test", "rules", TESTS.name, cwd=MONITORING)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rule_tests_catch_a_wrong_rule(tmp_path: Path) -> None:
    """The unit tests can fail: counting the driver's SW thermal slowdown as a hardware one
    breaks them."""
    shutil.copy(TESTS, tmp_path / TESTS.name)
    text = RULES.read_text()
    assert "hw_slowdown|hw_thermal_slowdown|hw_power_brake" in text
    (tmp_path / RULES.name).write_text(
        text.replace("hw_slowdown|hw_thermal_slowdown|hw_power_brake", "hw_.*|sw_.*")
    )
    proc = _promtool("test", "rules", TESTS.name, cwd=tmp_path)
    assert proc.returncode != 0 and "instance:imagectl_gpu_hw_slowdown:sum" in flat(
        proc.stdout + proc.stderr
    )


def test_a_malformed_rule_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        RULES.read_text().replace(
            "expr: imagectl_validation_passed == 0", "expr: imagectl_validation_passed =="
        )
    )
    proc = _promtool("check", "rules", "bad.yaml", cwd=tmp_path)
    assert proc.returncode != 0
