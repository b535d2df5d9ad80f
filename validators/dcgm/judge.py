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
from imagectl.validators.expectations import Expectations
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

RUN_ID = "dcgm.diag"
RUN_TITLE = "DCGM diagnostics (dcgmi diag)"
_ORDER = [Outcome.PASS, Outcome.SKIP, Outcome.WARN, Outcome.ERROR, Outcome.FAIL]
_OUTCOME_RANK = {o: i for i, o in enumerate(_ORDER)}


def _severity(outcome: Outcome) -> Severity:
    if outcome in (Outcome.FAIL, Outcome.ERROR):
        return Severity.CRITICAL
    return Severity.WARNING if outcome == Outcome.WARN else Severity.INFO


def _tail(text: str, n: int = 600) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else "..." + text[-n:]


def _run_result(route: Route, message: str, record: dict[str, Any], **details: Any) -> CheckResult:
    return CheckResult(
        id=RUN_ID,
        title=RUN_TITLE,
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
    details: dict[str, Any] = {
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
    common: dict[str, Any] = {
        "id": _check_id(test.name),
        "title": tables.title(test.name),
        "gpu": gpu,
        "details": details,
        "expected": {k: v for k, v in threshold.items() if k != "source"} if threshold else None,
    }
    if res.status == "Pass":
        return CheckResult(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            source=(threshold or {}).get("source"),
            message="; ".join(["DCGM: Pass", *res.info])[:500],
        )
    if res.status == "Skip":
        why = [e["message"] for e in errors] + list(res.info)
        return CheckResult(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.SKIP,
            message="DCGM skipped this test" + (f": {'; '.join(why)}" if why else ""),
        )
    if not routes:
        route = (
            tables.fail_without_code
            if res.status == "Fail"
            else Route(Outcome.WARN, Action.NONE, "DCGM status Warn")
        )
        msg = f"DCGM: {res.status} without a DCGM_FR_* code"
    else:
        ranked = sorted(
            zip(routes, errors, strict=True),
            key=lambda p: (_OUTCOME_RANK[p[0].outcome], p[0].action.rank),
            reverse=True,
        )
        route, first = ranked[0]
        msg = f"{first['name']} ({first['code']}): {first['message']}"
        if first["dcgm_suggestion"] and first["dcgm_suggestion"] not in first["message"]:
            msg += f". DCGM suggests: {first['dcgm_suggestion']}"
        if len(errors) > 1:
            msg += f" (+{len(errors) - 1} more DCGM error(s))"
    return CheckResult(
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


def judge(record: dict[str, Any], expect: Expectations, tables: Tables) -> list[CheckResult]:
    """Every check result of one recorded run."""
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
            CheckResult(
                id=RUN_ID,
                title=RUN_TITLE,
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
        return [
            _run_result(
                rf["runtime_error"],
                f"{cmd} could not run the diagnostic: {diag.runtime_error.strip()} "
                f"({_exit_meaning(exit_code, tables)})",
                record,
                stderr_tail=stderr,
            )
        ]
    results = _judge_tests(diag, tables)
    failing_tests = sorted(
        {t.name for t in diag.tests for r in (*t.results, t.summary) if r and r.status == "Fail"}
    )
    details = {
        "dcgm_version": version,
        "driver": diag.metadata.get("Driver Version Detected"),
        "tests": [t.name for t in diag.tests],
        "failing_tests": failing_tests,
        "level": record.get("level"),
    }
    if exit_code not in (0, None) and not failing_tests:
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
        run = CheckResult(
            id=RUN_ID,
            title=RUN_TITLE,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            duration_s=float(record.get("duration_s") or 0.0),
            message=f"{cmd} ran ({_exit_meaning(exit_code, tables)}): {summary}",
            details={"argv": record.get("argv"), "exit_code": exit_code, **details},
        )
    return [run, *results]
