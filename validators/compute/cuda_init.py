"""cuInit, tried in fresh processes: CUDA must initialise every time, not just eventually.

Each try is a new Python process that loads ``libcuda.so.1`` with ctypes and calls
``cuInit(0)`` then ``cuDeviceGetCount`` (the driver API: no torch, no runtime), so a flaky
initialisation (Modal sees ~0.1% of cuInit calls fail) shows up as failed tries. A try
that does not return within ``timeout_s`` counts as hung.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

declare(
    "cuda.init", "CUDA initialises (cuInit) in every fresh process",
    runs=Runs.SUBPROCESS, action=Action.BLOCK_IMAGE,
)  # fmt: skip

PROBE = r"""
import ctypes, json, time
t0 = time.perf_counter()
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    print(json.dumps({"rc": None, "error": str(exc)}))
    raise SystemExit(0)
rc = lib.cuInit(0)
count = ctypes.c_int(-1)
if rc == 0:
    lib.cuDeviceGetCount(ctypes.byref(count))
print(json.dumps({"rc": rc, "ms": (time.perf_counter() - t0) * 1e3, "devices": count.value}))
"""


def probe(tries: int, timeout_s: float = 60.0) -> list[dict[str, object]]:
    results = []
    for _ in range(tries):
        try:
            out = subprocess.run(
                [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=timeout_s
            )
            lines = out.stdout.strip().splitlines()
            results.append(
                json.loads(lines[-1]) if lines else {"rc": None, "error": out.stderr[-500:]}
            )
        except subprocess.TimeoutExpired:
            results.append({"rc": None, "error": f"cuInit did not return within {timeout_s:g} s"})
    return results


def init_check(tries: list[dict[str, Any]], expected_devices: int) -> CheckResult:
    failed = [t for t in tries if t.get("rc") != 0]
    times = [t["ms"] for t in tries if t.get("rc") == 0]
    counts = sorted({int(t.get("devices", -1)) for t in tries if t.get("rc") == 0})
    common: dict[str, Any] = {
        "id": "cuda.init",
        "unit": "ms",
        "measured": round(max(times), 1) if times else None,
        "details": {"tries": tries, "failed": len(failed), "device_counts": counts},
        "source": "Modal: ~0.1% of cuInit calls flake; a flaky init is a finding",
    }
    if not times:
        why = failed[0].get("error") or f"cuInit returned {failed[0].get('rc')}"
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.REBOOT,
            message=f"CUDA never initialised in {len(tries)} tries: {why}",
        )
    if failed:
        codes = sorted(
            {str(t.get("rc") if t.get("rc") is not None else t.get("error")) for t in failed}
        )
        return check_result(
            **common,
            severity=Severity.WARNING,
            outcome=Outcome.WARN,
            action=Action.REBOOT,
            message=f"cuInit failed in {len(failed)} of {len(tries)} fresh processes "
            f"({', '.join(codes)})",
        )
    if expected_devices and counts != [expected_devices]:
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.REBOOT,
            message=f"the driver sees {counts} devices, the shape has {expected_devices}",
        )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"cuInit succeeded in {len(tries)} of {len(tries)} fresh processes "
        f"(max {max(times):.0f} ms)",
    )
