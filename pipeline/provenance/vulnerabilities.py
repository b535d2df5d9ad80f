"""The vulnerability gate on a candidate's SBOM scan: Grype's JSON report judged against
the stack's threshold.

The threshold is the stack's ``validation.vulnerabilities`` (``fail_on``, ``only_fixed``),
or the sourced default in images/compat/vulnerabilities.yaml when the stack sets none;
the build workflow's scan step runs Grype with ``-o json`` and hands the report to
``imagectl scan``, so the threshold lives in one place and Grype's own ``--fail-on`` is
never given a second one. A match blocks when its severity is at or above ``fail_on`` in
Grype's order (and, with ``only_fixed``, its fix state is ``fixed``), as ``grype
--fail-on X [--only-fixed]`` would decide.

The report is read as untrusted input (Grype's presenter writes it from a database and an
SBOM a host's packages filled): bounded in size and depth, every field used checked for
type, a severity Grype does not have refused (exit 2) rather than counted as none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from imagectl.core.boundedjson import parse_bounded
from imagectl.core.errors import UserError
from imagectl.core.yamlfast import load_data
from imagectl.stacks.schema import Stack

MAX_REPORT_BYTES = 256 * 1024 * 1024  # Grype's JSON for a full GPU image is a few MiB
MAX_DEPTH = 32
HINT = "Pass the report Grype wrote with `-o json` (grype sbom:FILE -o json)"


@dataclass(frozen=True)
class Threshold:
    fail_on: str
    only_fixed: bool
    origin: str  # where it came from: the stack file, or the default's file


@dataclass(frozen=True)
class Match:
    vulnerability: str
    severity: str  # lower case, one of the severities
    fixed: bool
    package: str
    version: str
    fix_versions: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    threshold: Threshold
    blocking: tuple[Match, ...]
    counted: int  # matches in the report

    @property
    def ok(self) -> bool:
        return not self.blocking


_T = TypeVar("_T")


def _defaults(compat_dir: Path) -> tuple[list[str], dict[str, object], Path]:
    path = compat_dir / "vulnerabilities.yaml"
    doc = load_data(path) or {}
    order = [str(s) for s in doc.get("severities") or []]
    default = doc.get("default") or {}
    if not order or default.get("fail_on") not in order or not default.get("source"):
        raise UserError(
            "needs severities (Grype's order) and a default with fail_on among them and its source",
            where=str(path),
        )
    return order, default, path


def severities(compat_dir: Path) -> list[str]:
    return _defaults(compat_dir)[0]


def threshold_for(stack: Stack, stack_path: Path, compat_dir: Path) -> Threshold:
    """The stack's threshold, or the sourced default when the stack sets none."""
    order, default, path = _defaults(compat_dir)
    own = stack.validation.vulnerabilities
    if own is not None:
        if own.fail_on not in order:  # the schema's choices and the data file disagree
            raise UserError(
                f"validation.vulnerabilities.fail_on '{own.fail_on}' is not one of {order}",
                where=str(stack_path),
            )
        return Threshold(own.fail_on, own.only_fixed, f"{stack_path.name}")
    return Threshold(
        str(default["fail_on"]), bool(default.get("only_fixed", True)), f"default, {path.name}"
    )


def _field(obj: object, key: str, kind: type[_T], at: str, file: str) -> _T:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        got = type(value).__name__ if value is not None else "missing"
        raise UserError(
            f"{at}.{key} is {got}, not {kind.__name__}: this is not a Grype JSON report",
            where=file,
            hint=HINT,
        )
    return value


def read_report(data: bytes, *, where: str, order: list[str]) -> list[Match]:
    """Every match of Grype's JSON report, checked."""
    doc = parse_bounded(
        data, kind="Grype report", where=where, hint=HINT, max_bytes=MAX_REPORT_BYTES,
        max_depth=MAX_DEPTH,
    )  # fmt: skip
    descriptor = _field(doc, "descriptor", dict, "report", where)
    if descriptor.get("name") != "grype":
        raise UserError(
            f"descriptor.name is {descriptor.get('name')!r}, not 'grype'", where=where, hint=HINT
        )
    out = []
    for i, raw in enumerate(_field(doc, "matches", list, "report", where)):
        at = f"matches[{i}]"
        vuln = _field(raw, "vulnerability", dict, at, where)
        artifact = _field(raw, "artifact", dict, at, where)
        severity = _field(vuln, "severity", str, f"{at}.vulnerability", where).strip().lower()
        if severity not in order:
            raise UserError(
                f"{at}.vulnerability.severity is {severity[:40]!r}, which Grype does not "
                f"report (it reports {', '.join(order)})",
                where=where,
                hint=HINT,
            )
        raw_fix = vuln.get("fix")
        fix: dict[object, object] = raw_fix if isinstance(raw_fix, dict) else {}
        raw_versions = fix.get("versions")
        versions: list[object] = raw_versions if isinstance(raw_versions, list) else []
        out.append(
            Match(
                vulnerability=_field(vuln, "id", str, f"{at}.vulnerability", where),
                severity=severity,
                fixed=fix.get("state") == "fixed",
                package=_field(artifact, "name", str, f"{at}.artifact", where),
                version=_field(artifact, "version", str, f"{at}.artifact", where),
                fix_versions=tuple(str(v) for v in versions if isinstance(v, str)),
            )
        )
    return out


def judge(matches: list[Match], threshold: Threshold, order: list[str]) -> Verdict:
    floor = order.index(threshold.fail_on)
    blocking = tuple(
        m
        for m in matches
        if order.index(m.severity) >= floor and (m.fixed or not threshold.only_fixed)
    )
    return Verdict(threshold, blocking, len(matches))
