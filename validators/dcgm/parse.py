"""Read what ``dcgmi diag -j`` prints (DCGM 4.x) into plain records, strictly.

The layout is the one ``dcgmi/Diag.cpp`` builds (NVIDIA/DCGM v4.4.1,
``HelperJsonBuildOutput``; key names in ``nvvs/include/NvvsJsonStrings.h``; DCGM's own
schema ``testing/python3/dcgm_diag_schema.json``)::

    {"DCGM Diagnostic": {"test_categories": [
        {"category": "Hardware", "tests": [
            {"name": "memory",
             "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                          "status": "Fail",
                          "warnings": [{"warning": "...", "error_id": 52,
                                        "error_category": 10, "error_severity": 2}],
                          "info": ["..."]}],
             "test_summary": {"status": "Fail"}}]}]},
     "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1,
                        "entities": [{"entity_id": 0, "device_id": "2330",
                                      "serial_num": "..."}]}],
     "metadata": {"version": "4.4.1", "Driver Version Detected": "..."}}

or, when the diagnostic could not run, ``{"DCGM Diagnostic": {"version": ...,
"runtime_error": "..."}}``. Anything else raises ``DiagFormatError`` naming the path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

# dcgmi/Diag.cpp HelperDisplayDiagResult: JSON shows Pass, Skip, Fail (a WARN result prints
# as "Fail" unless asked otherwise) and omits tests that did not run.
STATUSES = ("Pass", "Skip", "Warn", "Fail")


class DiagFormatError(ValueError):
    """Not the JSON ``dcgmi diag -j`` prints."""


@dataclass(frozen=True)
class Finding:
    code: int
    message: str
    category: int | None = None
    severity: int | None = None


@dataclass(frozen=True)
class EntityResult:
    """One entity's result of one test; ``entity_group`` None for the test summary."""

    status: str
    entity_group: str | None = None
    entity_id: int | None = None
    findings: tuple[Finding, ...] = ()
    info: tuple[str, ...] = ()


@dataclass(frozen=True)
class TestRun:
    name: str
    category: str
    results: tuple[EntityResult, ...]
    summary: EntityResult | None


@dataclass
class Diag:
    tests: list[TestRun] = field(default_factory=list)
    runtime_error: str | None = None
    device_ids: dict[int, str] = field(default_factory=dict)
    serials: dict[int, str] = field(default_factory=dict)
    metadata: dict[str, object] = field(default_factory=dict)


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise DiagFormatError(f"{where}: {what}")


def _obj(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise DiagFormatError(f"{where}: expected an object")
    return value


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise DiagFormatError(f"{where}: expected an array")
    return value


def _int(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise DiagFormatError(f"{where}: expected an integer")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise DiagFormatError(f"{where}: expected a string")
    return value


def _opt_int(value: object) -> int | None:
    """A finding's optional category or severity: DCGM's integer, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _result(node: object, where: str) -> EntityResult:
    node = _obj(node, where)
    status = _str(node.get("status"), f"{where}.status")
    _need(status in STATUSES, f"{where}.status", f"unknown status {status!r}")
    findings = []
    for i, w in enumerate(_list(node.get("warnings", []), f"{where}.warnings")):
        at = f"{where}.warnings[{i}]"
        w = _obj(w, at)
        findings.append(
            Finding(
                code=_int(w.get("error_id"), f"{at}.error_id"),
                message=_str(w.get("warning"), f"{at}.warning"),
                category=_opt_int(w.get("error_category")),
                severity=_opt_int(w.get("error_severity")),
            )
        )
    info = tuple(
        _str(s, f"{where}.info[{i}]") for i, s in enumerate(_list(node.get("info", []), where))
    )
    group = node.get("entity_group")
    entity = node.get("entity_id")
    if group is not None or entity is not None:
        group = _str(group, f"{where}.entity_group")
        entity = _int(entity, f"{where}.entity_id")
    return EntityResult(status, group, entity, tuple(findings), info)


def parse_diag(text: str) -> Diag:
    """Parse ``dcgmi diag -j`` stdout. Raises ``DiagFormatError`` for anything else."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        snippet = text.strip()[:80]
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise DiagFormatError(f"not JSON ({why}): {snippet!r}") from None
    doc = _obj(doc, "(top level)")
    _need("DCGM Diagnostic" in doc, "(top level)", "no 'DCGM Diagnostic' object")
    top = _obj(doc["DCGM Diagnostic"], "DCGM Diagnostic")
    metadata = doc.get("metadata")
    out = Diag(metadata=dict(metadata) if isinstance(metadata, dict) else {})
    if "runtime_error" in top:
        out.runtime_error = _str(top["runtime_error"], "DCGM Diagnostic.runtime_error")
        return out
    cats = _list(top.get("test_categories"), "DCGM Diagnostic.test_categories")
    for ci, cat in enumerate(cats):
        cwhere = f"test_categories[{ci}]"
        cat = _obj(cat, cwhere)
        cname = _str(cat.get("category"), f"{cwhere}.category")
        for ti, test in enumerate(_list(cat.get("tests"), f"{cwhere}.tests")):
            twhere = f"{cwhere}.tests[{ti}]"
            test = _obj(test, twhere)
            name = _str(test.get("name"), f"{twhere}.name")
            results = tuple(
                _result(r, f"{twhere}.results[{ri}]")
                for ri, r in enumerate(_list(test.get("results", []), f"{twhere}.results"))
            )
            summary = (
                _result(test["test_summary"], f"{twhere}.test_summary")
                if "test_summary" in test
                else None
            )
            _need(bool(results) or summary is not None, twhere, "neither results nor test_summary")
            out.tests.append(TestRun(name, cname, results, summary))
    _need(bool(out.tests), "DCGM Diagnostic.test_categories", "no tests")
    for gi, group in enumerate(_list(doc.get("entity_groups", []), "entity_groups")):
        gwhere = f"entity_groups[{gi}]"
        group = _obj(group, gwhere)
        if group.get("entity_group") != "GPU":
            continue
        for ei, ent in enumerate(_list(group.get("entities"), f"{gwhere}.entities")):
            ent = _obj(ent, f"{gwhere}.entities[{ei}]")
            eid = _int(ent.get("entity_id"), f"{gwhere}.entities[{ei}].entity_id")
            device_id, serial = ent.get("device_id"), ent.get("serial_num")
            if isinstance(device_id, str):
                out.device_ids[eid] = device_id
            if isinstance(serial, str):
                out.serials[eid] = serial
    return out
