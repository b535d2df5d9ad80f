"""Judge one ``dcgmi diag`` run (live, or the snapshot's recorded ``dcgm`` section): one
``CheckResult`` per DCGM test and entity, plus ``dcgm.diag`` for the run itself.

Actions come from DCGM's own severity of each DCGM_FR_* code (``data/dcgm.yaml``,
``data/dcgm_errors.yaml``); a run that gives no verdict (missing, hung, crashed, garbage)
is never a pass.
"""

from __future__ import annotations

import re
import signal
from typing import Any

from imagectl.validators.dcgm.parse import Diag, DiagFormatError, EntityResult, TestRun, parse_diag
from imagectl.validators.dcgm.table import Route, Tables
from imagectl.validators.dcgm.table import tables as load_tables
from imagectl.validators.expectations import Expectations
from imagectl.validators.registry import Runs, check_result, declare, family
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

RUN_ID = "dcgm.diag"
declare(RUN_ID, "DCGM diagnostics (dcgmi diag)", runs=Runs.DCGM, action=Action.BLOCK_IMAGE)


def _known_tests() -> list[tuple[str, str]]:
    return [(_check_id(test), title) for test, title in load_tables().titles.items()]


family(
    "dcgm.",
    "One DCGM diagnostic test, per GPU (each test dcgmi diag reports)",
    runs=Runs.DCGM,
    action=Action.BLOCK_IMAGE,
    members=_known_tests,
)
_ORDER = [Outcome.PASS, Outcome.SKIP, Outcome.WARN, Outcome.ERROR, Outcome.FAIL]
_OUTCOME_RANK = {o: i for i, o in enumerate(_ORDER)}


def _severity(outcome: Outcome) -> Severity:
    if outcome in (Outcome.FAIL, Outcome.ERROR):
        return Severity.CRITICAL
    return Severity.WARNING if outcome == Outcome.WARN else Severity.INFO


def _tail(text: str, n: int = 600) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else "..." + text[-n:]


def _run_result(
    route: Route, message: str, record: dict[str, Any], **details: object
) -> CheckResult:
    return check_result(
        id=RUN_ID,
        severity=_severity(route.outcome),
        outcome=route.outcome,
        action=route.action if route.outcome in (Outcome.FAIL, Outcome.ERROR) else Action.NONE,
        source=route.source,
        duration_s=float(record.get("duration_s") or 0.0),
        message=message,
        details={
            "argv": record.get("argv"),
            "exit_code": record.get("exit_code"),
            "timeout_s": record.get("timeout_s"),
            **details,
        },
    )


def _exit_meaning(code: int | None, tables: Tables) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}" + (f" ({tables.exit_codes[code]})" if code in tables.exit_codes else "")


def _command(record: dict[str, Any]) -> str:
    argv = record.get("argv") or ["dcgmi", "diag", "-r", str(record.get("level")), "-j"]
    return " ".join(["dcgmi", *argv[1:]])


def _check_id(test: str) -> str:
    return "dcgm." + (re.sub(r"[^a-z0-9_]+", "_", test.lower()).strip("_") or "unnamed")


def _judge_entity(test: TestRun, res: EntityResult, diag: Diag, tables: Tables) -> CheckResult:
    gpu = res.entity_id if res.entity_group == "GPU" else None
    device_id = diag.device_ids.get(gpu) if gpu is not None else None
    threshold = tables.threshold(device_id, test.name)
    errors: list[dict[str, Any]] = []
    routes: list[Route] = []
    for f in res.findings:
        code = tables.code(f.code)
        routes.append(tables.route(code))
        errors.append(
            {
                "code": f.code,
                "name": code.name,
                "dcgm_severity": code.severity,
                "dcgm_category": code.category,
                "message": f.message,
                "dcgm_suggestion": code.suggestion,
            }
        )
    where = f"{res.entity_group}{res.entity_id}" if res.entity_group else "host"
    details: dict[str, object] = {
        "dcgm_test": test.name,
        "dcgm_category": test.category,
        "dcgm_status": res.status,
        "entity": where,
        "errors": errors,
        "info": list(res.info),
    }
    if device_id:
        details["device_id"] = device_id
    if gpu is not None and gpu in diag.serials:
        details["serial"] = diag.serials[gpu]
    common: dict[str, object] = {
        "id": _check_id(test.name),
        "title": tables.title(test.name),
        "gpu": gpu,
        "details": details,
        "expected": {k: v for k, v in threshold.items() if k != "source"} if threshold else None,
    }
    if res.status == "Pass":
        return check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            source=(threshold or {}).get("source"),
            message="; ".join(["DCGM: Pass", *res.info])[:500],
        )
    if res.status == "Skip" and all(r.outcome is Outcome.SKIP for r in routes):
        why = [e["message"] for e in errors] + list(res.info)
        return check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.SKIP,
            message="DCGM skipped this test" + (f": {'; '.join(why)}" if why else ""),
        )
    # A Skip keeps its codes: targeted_power skips a GPU whose enforced power limit is too
    # low and says so with DCGM_FR_ENFORCED_POWER_LIMIT (TargetedPower_wrapper.cpp).
    routes_errors = [(r, e) for r, e in zip(routes, errors, strict=True)]
    if res.status == "Skip":
        routes_errors = [(r, e) for r, e in routes_errors if r.outcome is not Outcome.SKIP]
    if not routes:
        route = (
            tables.fail_without_code
            if res.status == "Fail"
            else Route(Outcome.WARN, Action.NONE, "DCGM status Warn")
        )
        msg = f"DCGM: {res.status} without a DCGM_FR_* code"
    else:
        ranked = sorted(
            routes_errors,
            key=lambda p: (_OUTCOME_RANK[p[0].outcome], p[0].action.rank),
            reverse=True,
        )
        route, first = ranked[0]
        msg = f"{first['name']} ({first['code']}): {first['message']}"
        if res.status == "Skip":
            msg = f"DCGM skipped this test with {msg}"
        if first["dcgm_suggestion"] and first["dcgm_suggestion"] not in first["message"]:
            msg += f". DCGM suggests: {first['dcgm_suggestion']}"
        if len(errors) > 1:
            msg += f" (+{len(errors) - 1} more DCGM error(s))"
    return check_result(
        **common,
        severity=_severity(route.outcome),
        outcome=route.outcome,
        action=route.action if route.outcome in (Outcome.FAIL, Outcome.ERROR) else Action.NONE,
        source=route.source,
        message=msg,
    )


def _judge_tests(diag: Diag, tables: Tables) -> list[CheckResult]:
    out: list[CheckResult] = []
    for test in diag.tests:
        for res in test.results:
            out.append(_judge_entity(test, res, diag, tables))
        summary = test.summary
        if summary is not None and (not test.results or summary.findings):
            # Errors DCGM ties to no entity (or a test without per-entity results).
            out.append(_judge_entity(test, summary, diag, tables))
    return out


_RETURN = re.compile(r"Return: \((-?\d+)\)")


def _runtime_route(text: str, exit_code: int | None, tables: Tables) -> tuple[str | None, Route]:
    """The runtime error's dcgmReturn_t (``Return: (-52) : ...`` in its text, else dcgmi's
    exit status, 256 + the status) and its route."""
    found = _RETURN.search(text)
    status = int(found.group(1)) if found else None
    if status is None and isinstance(exit_code, int) and exit_code > 128:
        status = exit_code - 256
    if status is not None and status in tables.runtime_errors:
        name, route = tables.runtime_errors[status]
        return name, route
    return None, tables.run_failures["runtime_error"]


def _level_check(
    record: dict[str, object], profile: str | None, tables: Tables
) -> CheckResult | None:
    """The level that ran must be at least the profile's (data/dcgm.yaml levels)."""
    want = tables.levels.get(profile or "")
    ran = record.get("level")
    if want is None or not isinstance(ran, int) or ran >= want.level:
        return None
    return _run_result(
        tables.run_failures["level_too_low"],
        f"dcgmi diag ran at level {ran}, but profile {profile} runs level {want.level} "
        f"({want.source}): a level-{ran} run does not satisfy {profile}",
        record,
        level=ran,
        expected_level=want.level,
    )


def judge(
    record: dict[str, Any], expect: Expectations, tables: Tables, profile: str | None = None
) -> list[CheckResult]:
    """Every check result of one recorded run (``profile``: the level it must have run)."""
    out = _judge(record, expect, tables)
    low = _level_check(record, profile, tables)
    if low is None or not out or out[0].outcome is Outcome.SKIP:
        return out
    first = out[0]
    if first.id == RUN_ID and (first.failed or first.outcome is Outcome.WARN):
        return [first, low, *out[1:]]  # the run's own verdict stays; the level fails beside it
    return [low, *(r for r in out if r.id != RUN_ID)]


def _judge(record: dict[str, Any], expect: Expectations, tables: Tables) -> list[CheckResult]:
    rf = tables.run_failures
    cmd = _command(record)
    if record.get("dcgmi") is None and not record.get("argv"):
        reason = record.get("error") or "dcgmi not found"
        if expect.dcgm:
            return [
                _run_result(
                    rf["not_installed_pinned"],
                    f"{reason}, but the stack pins DCGM {expect.dcgm}: the image is broken "
                    "(playbooks/roles/dcgm installs datacenter-gpu-manager-4)",
                    record,
                )
            ]
        return [
            check_result(
                id=RUN_ID,
                severity=Severity.INFO,
                outcome=Outcome.SKIP,
                message=f"{reason}; the stack does not pin DCGM",
            )
        ]
    if record.get("error"):
        return [_run_result(rf["crashed"], f"{cmd}: {record['error']}", record)]
    stderr = _tail(record.get("stderr_tail", ""))
    exit_code = record.get("exit_code")
    if record.get("timed_out"):
        return [
            _run_result(
                rf["timeout"],
                f"{cmd} did not finish within {record.get('timeout_s')} s "
                f"({record.get('limited_by') or 'its hard timeout'}): the process group was "
                "killed; a hang is a failed check",
                record,
                stderr_tail=stderr,
            )
        ]
    if isinstance(exit_code, int) and exit_code < 0:
        return [
            _run_result(
                rf["crashed"],
                f"{cmd} crashed: {_exit_meaning(exit_code, tables)}; stderr: {stderr or '(empty)'}",
                record,
                stderr_tail=stderr,
            )
        ]
    stdout = record.get("stdout") or ""
    try:
        diag = parse_diag(stdout)
    except DiagFormatError as exc:
        if exit_code != 0 and not stdout.strip():
            return [
                _run_result(
                    rf["crashed"],
                    f"{cmd} failed without printing its JSON: {_exit_meaning(exit_code, tables)}; "
                    f"stderr: {stderr or '(empty)'}",
                    record,
                    stderr_tail=stderr,
                )
            ]
        return [
            _run_result(
                rf["garbage"],
                f"{cmd} printed something that is not DCGM's diagnostic JSON ({exc}); "
                f"{_exit_meaning(exit_code, tables)}",
                record,
                stderr_tail=stderr,
                stdout_head=stdout[:300],
            )
        ]
    version = diag.metadata.get("version")
    if diag.runtime_error is not None:
        status_name, route = _runtime_route(diag.runtime_error, exit_code, tables)
        return [
            _run_result(
                route,
                f"{cmd} could not run the diagnostic: {diag.runtime_error.strip()} "
                f"({_exit_meaning(exit_code, tables)})",
                record,
                stderr_tail=stderr,
                dcgm_status=status_name,
            )
        ]
    results = _judge_tests(diag, tables)
    failing_tests = sorted(
        {
            t.name
            for t in diag.tests
            for r in (*t.results, t.summary)
            # GetFailureResult counts every error, a Skip's too (targeted power's low limit)
            if r and (r.status == "Fail" or (r.findings and r.status != "Pass"))
        }
    )
    details = {
        "dcgm_version": version,
        "driver": diag.metadata.get("Driver Version Detected"),
        "tests": [t.name for t in diag.tests],
        "failing_tests": failing_tests,
        "level": record.get("level"),
    }
    judged_fail = any(r.failed for r in results)
    if exit_code not in (0, None) and failing_tests and not judged_fail:
        run = _run_result(
            rf["monitor_only"],
            f"{cmd}: {_exit_meaning(exit_code, tables)} for DCGM findings that leave the GPU "
            f"in service ({', '.join(failing_tests)}: see dcgm.*): kept as a warning",
            record,
            stderr_tail=stderr,
            **details,
        )
    elif exit_code not in (0, None) and not failing_tests:
        run = _run_result(
            rf["exit_disagrees"],
            f"{cmd}: {_exit_meaning(exit_code, tables)}, but its JSON reports no failing test",
            record,
            stderr_tail=stderr,
            **details,
        )
    else:
        summary = f"{len(diag.tests)} DCGM test(s) at level {record.get('level')}"
        if failing_tests:
            summary += f"; failing: {', '.join(failing_tests)} (see dcgm.*)"
        else:
            summary += ", all passed"
        run = check_result(
            id=RUN_ID,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            duration_s=float(record.get("duration_s") or 0.0),
            message=f"{cmd} ran ({_exit_meaning(exit_code, tables)}): {summary}",
            details={"argv": record.get("argv"), "exit_code": exit_code, **details},
        )
    return [run, *results]
