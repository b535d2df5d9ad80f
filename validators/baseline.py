"""Compare a receipt with a baseline receipt from the same shape: ``--baseline RECEIPT``.

Run the candidate image and the current production image on the same hardware, then
compare: a figure that falls on the candidate but not on production points at the image
(driver, CUDA, NCCL), not at the host. Every numeric ``measured`` is matched by
(check id, gpu); collective sweeps by size (``details["sizes"]``, busbw) and the NVLink
matrix by pair (``details["pairs"]``, GB/s). Deltas are reported for all of them; the
policy fails a check when a higher-is-better figure (GB/s, TFLOP/s) regressed by more than
``max_regression_pct``. Per-size figures gate only at the sizes the check itself gated
(``gate: true``; small sizes are latency-bound noise). Non-numeric figures that changed
(the NCCL that ran, the PCIe link) are listed in the summary.
"""

from __future__ import annotations

from typing import Any

from imagectl.core.errors import UserError
from imagectl.validators.receipt import Receipt
from imagectl.validators.registry import REGISTRY, Runs, check_result, declare, family
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

HIGHER_IS_BETTER = {"GB/s", "TFLOP/s", "Gbps", "GFLOP/s"}

declare(
    "baseline.summary", "This run against the baseline receipt",
    runs=Runs.SESSION, action=Action.NONE, severity=Severity.WARNING,
)  # fmt: skip
declare(
    "baseline.compare", "Comparison with the baseline receipt",
    runs=Runs.SESSION, action=Action.NONE, severity=Severity.WARNING,
)  # fmt: skip


def _compared() -> list[tuple[str, str]]:
    """Every check a baseline can compare (any with a figure), as its baseline id."""
    return [
        (f"baseline.{s.id}", f"{s.id} against the baseline receipt")
        for s in REGISTRY.values()
        if not s.is_family and not s.id.startswith("baseline.")
    ]


family(
    "baseline.",
    "One check's figures against the baseline receipt (per check compared)",
    runs=Runs.SESSION,
    action=Action.NONE,
    members=_compared,
)


def _shape(receipt: Receipt) -> str | None:
    shape = receipt.expectations.get("shape")
    return str(shape) if shape else None


def _identity(receipt: Receipt) -> dict[str, str | None]:
    """What the receipt says it ran on: the shape, the expected GPU SKU (its
    expectations) and the GPU model NVML named (its first GPU); each is compared only
    where both receipts carry it, so a SKU is never compared with an NVML name."""
    sku = receipt.expectations.get("gpu")
    return {
        "shape": _shape(receipt),
        "GPU model": str(sku) if sku else None,
        "GPU": receipt.gpus[0].name if receipt.gpus and receipt.gpus[0].name else None,
    }


def _checks(receipt: Receipt) -> dict[tuple[str, int | None], CheckResult]:
    out: dict[tuple[str, int | None], CheckResult] = {}
    for check in receipt.checks:
        out.setdefault((check.id, check.gpu), check)
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _delta(current: float, base: float) -> float | None:
    return None if base == 0 else round((current - base) / abs(base) * 100.0, 2)


def _compare_rows(
    cur_rows: list[dict[str, Any]],
    base_rows: list[dict[str, Any]],
    key: Any,
    field: str,
    limit: float,
) -> list[dict[str, object]]:
    base_by = {key(r): r for r in base_rows if _is_number(r.get(field))}
    out = []
    for row in cur_rows:
        base = base_by.get(key(row))
        if base is None or not _is_number(row.get(field)):
            continue
        delta = _delta(row[field], base[field])
        gated = bool(row.get("gate", True)) and bool(base.get("gate", True))
        out.append(
            {
                "key": key(row),
                "current": row[field],
                "baseline": base[field],
                "delta_pct": delta,
                "gated": gated,
                "regressed": gated and delta is not None and -delta > limit,
            }
        )
    return out


def _compare_check(cur: CheckResult, base: CheckResult, limit: float) -> CheckResult | None:
    unit = cur.unit or base.unit
    higher = unit in HIGHER_IS_BETTER
    details: dict[str, object] = {"unit": unit, "higher_is_better": higher}
    regressions: list[str] = []
    delta = None
    if _is_number(cur.measured) and _is_number(base.measured):
        delta = _delta(cur.measured, base.measured)
        details.update(current=cur.measured, baseline=base.measured, delta_pct=delta)
        if higher and delta is not None and -delta > limit:
            regressions.append(f"{cur.measured} vs {base.measured} {unit} ({delta:+.1f}%)")
    cur_d, base_d = cur.details, base.details
    if higher:
        for name, key, field in (
            ("sizes", lambda r: r.get("bytes"), "busbw_gbps"),
            ("pairs", lambda r: f"{r.get('src')}->{r.get('dst')}", "gbps"),
        ):
            if isinstance(cur_d.get(name), list) and isinstance(base_d.get(name), list):
                rows = _compare_rows(cur_d[name], base_d[name], key, field, limit)
                if rows:
                    details[name] = rows
                    regressions += [
                        f"{name[:-1]} {r['key']}: {r['current']:.4g} vs {r['baseline']:.4g} "
                        f"({r['delta_pct']:+.1f}%)"
                        for r in rows
                        if r["regressed"]
                    ]
    if delta is None and not any(k in details for k in ("sizes", "pairs")):
        return None
    common: dict[str, object] = {
        "id": f"baseline.{cur.id}",
        "title": f"{cur.id} against the baseline receipt",
        "gpu": cur.gpu,
        "unit": "%",
        "measured": delta,
        "expected": -limit if higher else None,
        "source": "imagectl validate --baseline FILE",
        "details": details,
    }
    if regressions:
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            message=f"regressed more than {limit:g}%: " + "; ".join(regressions),
        )
    text = "no delta" if delta is None else f"{delta:+.1f}%"
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"{text} against the baseline" + ("" if higher else " (not gated)"),
    )


def compare_to_baseline(
    receipt: Receipt, baseline: Receipt, *, max_regression_pct: float
) -> list[CheckResult]:
    """Per compared check a ``baseline.<id>`` result, then a ``baseline.summary``."""
    if not _is_number(max_regression_pct) or max_regression_pct < 0:
        raise UserError(
            f"the maximum regression must be a percentage >= 0, got {max_regression_pct!r}",
            hint="For example --max-regression 10",
        )
    current_checks, base_checks = _checks(receipt), _checks(baseline)
    mine_all, theirs_all = _identity(receipt), _identity(baseline)
    for what, mine in mine_all.items():
        theirs = theirs_all[what]
        if mine and theirs and mine != theirs:
            raise UserError(
                f"the baseline receipt is from {what} {theirs!r}, this run is on {mine!r}",
                where="--baseline",
                hint="Compare with a baseline from the same shape and GPU model",
            )
    results: list[CheckResult] = []
    changed, missing = [], []
    for key, base in base_checks.items():
        cur = current_checks.get(key)
        if cur is None:
            if _is_number(base.measured):
                missing.append({"id": key[0], "gpu": key[1]})
            continue
        result = _compare_check(cur, base, max_regression_pct)
        if result is not None:
            results.append(result)
        elif cur.measured != base.measured and base.measured is not None:
            changed.append(
                {"id": key[0], "gpu": key[1], "current": cur.measured, "baseline": base.measured}
            )
    new = [
        {"id": k[0], "gpu": k[1]}
        for k, c in current_checks.items()
        if k not in base_checks and _is_number(c.measured)
    ]
    failed = [r for r in results if r.outcome is Outcome.FAIL]
    details = {
        "compared": len(results),
        "regressed": [{"id": r.id, "gpu": r.gpu} for r in failed],
        "changed": changed,
        "missing_in_current": missing,
        "new_in_current": new,
        "max_regression_pct": max_regression_pct,
        "baseline": {
            "image_id": baseline.image_id,
            "host": baseline.host.get("hostname"),
            "profile": baseline.profile,
            "shape": theirs_all["shape"],
            "finished_at": baseline.finished_at,
        },
        "shape_verified": bool(mine_all["shape"] and theirs_all["shape"]),
        "gpu_verified": any(mine_all[k] and theirs_all[k] for k in ("GPU model", "GPU")),
    }
    if receipt.profile != baseline.profile:
        details["profile_mismatch"] = [receipt.profile, baseline.profile]
    if failed:
        outcome, severity = Outcome.FAIL, Severity.CRITICAL
        message = (
            f"{len(failed)} of {len(results)} figures regressed more than {max_regression_pct:g}%"
        )
    elif missing:
        outcome, severity = Outcome.WARN, Severity.WARNING
        message = f"{len(missing)} figures of the baseline are missing from this run"
    else:
        outcome, severity = Outcome.PASS, Severity.INFO
        message = f"{len(results)} figures within {max_regression_pct:g}% of the baseline"
    if changed:
        message += "; changed: " + ", ".join(
            f"{c['id']} {c['baseline']} -> {c['current']}" for c in changed
        )
    results.append(
        check_result(
            id="baseline.summary",
            severity=severity,
            outcome=outcome,
            measured=len(failed),
            unit="regressions",
            details=details,
            message=message,
        )
    )
    return results
