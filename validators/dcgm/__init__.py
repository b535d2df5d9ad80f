"""NVIDIA's own diagnostics beside ours: ``dcgmi diag -r <level> -j`` per profile, one
check result per DCGM test (``dcgm.<test>``, per GPU where DCGM reports per GPU) with
DCGM's error code, message and an action from DCGM's own severity of that code.

Live, dcgmi runs here under a hard timeout (``run.py``); in replay the snapshot's
recorded ``dcgm`` section is judged by the same code (``judge.py``).
"""

from __future__ import annotations

from imagectl.validators.dcgm.judge import RUN_ID, judge
from imagectl.validators.dcgm.run import run_diag
from imagectl.validators.dcgm.table import tables
from imagectl.validators.expectations import Expectations
from imagectl.validators.registry import check_result
from imagectl.validators.results import CheckResult, Outcome, Severity

__all__ = ["dcgm_checks", "record_diag"]

# Seconds kept back from the caller's deadline to judge the output.
DEADLINE_MARGIN_S = 2.0


def _skip(reason: str) -> list[CheckResult]:
    return [check_result(id=RUN_ID, severity=Severity.INFO, outcome=Outcome.SKIP, message=reason)]


def record_diag(level: int, timeout_s: float | None = None) -> dict[str, object]:
    """Run ``dcgmi diag -r level -j`` here; the record ``imagectl snapshot`` stores."""
    t = tables()
    if timeout_s is None:
        by_level = {lv.level: lv.timeout_s for lv in t.levels.values()}
        timeout_s = by_level.get(level, max(by_level.values()))
    return run_diag(level, timeout_s, search=t.dcgmi_paths)


def dcgm_checks(
    profile: str,
    expect: Expectations,
    *,
    recorded: dict[str, object] | None,
    replay: bool,
    deadline_s: float,
) -> list[CheckResult]:
    t = tables()
    level = t.levels.get(profile)
    if level is None:
        return _skip(f"profile {profile} runs no DCGM diagnostic")
    if replay:
        if recorded is None:
            return _skip(
                "DCGM diagnostics not recorded in this snapshot "
                "(capture with `imagectl snapshot -o FILE --dcgm-level N`)"
            )
        return judge(recorded, expect, t, profile)
    timeout = max(1.0, min(level.timeout_s, deadline_s - DEADLINE_MARGIN_S))
    record = run_diag(level.level, timeout, search=t.dcgmi_paths)
    if timeout < level.timeout_s:
        record["limited_by"] = (
            f"the {profile} profile's remaining time; DCGM r{level.level}'s own hard timeout "
            f"is {level.timeout_s:g} s"
        )
    return judge(record, expect, t, profile)
