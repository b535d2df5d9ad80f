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

from imagectl.errors import UserError
from imagectl.validators.results import CheckResult, Outcome, Severity

HIGHER_IS_BETTER = {"GB/s", "TFLOP/s", "Gbps", "GFLOP/s"}


def _expectations(receipt: dict[str, Any]) -> dict[str, Any]:
    exp = receipt.get("expectations") or {}
    return exp if isinstance(exp, dict) else {}


def _shape(receipt: dict[str, Any]) -> str | None:
    host = receipt.get("host") or {}
    return (
        receipt.get("shape")
        or _expectations(receipt).get("shape")
        or (host.get("shape") if isinstance(host, dict) else None)
    )


def _gpu_model(receipt: dict[str, Any]) -> str | None:
    """The GPU SKU or model name, wherever the receipt carries it (a validator receipt
    keeps the expected SKU under ``expectations.gpu`` and NVML names under ``gpus``)."""
    for value in (receipt.get("gpu"), _expectations(receipt).get("gpu")):
        if value:
            return str(value)
    top = receipt.get("gpus")
    if isinstance(top, list) and top and isinstance(top[0], dict) and top[0].get("name"):
        return str(top[0]["name"])
    host = receipt.get("host") or {}
    if not isinstance(host, dict):
        return None
    for key in ("gpu", "gpu_sku", "gpu_model", "gpu_name"):
        if host.get(key):
            return str(host[key])
    gpus = host.get("gpus")
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        return str(gpus[0]["name"])
    return None


def _checks(receipt: Any, which: str) -> dict[tuple[str, Any], dict[str, Any]]:
    if not isinstance(receipt, dict) or not isinstance(receipt.get("checks"), list):
        raise UserError(
            f"the {which} receipt has no 'checks' list",
            where=f"{which} receipt",
            hint="Pass a receipt written by imagectl validate (JSON with a checks list)",
        )
    out: dict[tuple[str, Any], dict[str, Any]] = {}
    for check in receipt["checks"]:
        if isinstance(check, dict) and "id" in check:
            out.setdefault((check["id"], check.get("gpu")), check)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _delta(current: float, base: float) -> float | None:
    return None if base == 0 else round((current - base) / abs(base) * 100.0, 2)


def _compare_rows(
    cur_rows: list[dict[str, Any]],
    base_rows: list[dict[str, Any]],
    key: Any,
    field: str,
    limit: float,
) -> list[dict[str, Any]]:
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


def _compare_check(cur: dict[str, Any], base: dict[str, Any], limit: float) -> CheckResult | None:
    unit = cur.get("unit") or base.get("unit")
    higher = unit in HIGHER_IS_BETTER
    details: dict[str, Any] = {"unit": unit, "higher_is_better": higher}
    regressions: list[str] = []
    delta = None
    if _is_number(cur.get("measured")) and _is_number(base.get("measured")):
        delta = _delta(cur["measured"], base["measured"])
        details.update(current=cur["measured"], baseline=base["measured"], delta_pct=delta)
        if higher and delta is not None and -delta > limit:
            regressions.append(f"{cur['measured']} vs {base['measured']} {unit} ({delta:+.1f}%)")
    cur_d, base_d = cur.get("details") or {}, base.get("details") or {}
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
    common: dict[str, Any] = {
        "id": f"baseline.{cur['id']}",
        "title": f"{cur['id']} against the baseline receipt",
        "gpu": cur.get("gpu"),
        "unit": "%",
        "measured": delta,
        "expected": -limit if higher else None,
        "source": "imagectl validate --baseline",
        "details": details,
    }
    if regressions:
        return CheckResult(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            message=f"regressed more than {limit:g}%: " + "; ".join(regressions),
        )
    text = "no delta" if delta is None else f"{delta:+.1f}%"
    return CheckResult(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"{text} against the baseline" + ("" if higher else " (not gated)"),
    )


def compare_to_baseline(
    receipt: dict[str, Any], baseline: dict[str, Any], *, max_regression_pct: float
) -> list[CheckResult]:
    """Per compared check a ``baseline.<id>`` result, then a ``baseline.summary``."""
    if not _is_number(max_regression_pct) or max_regression_pct < 0:
        raise UserError(
            f"the maximum regression must be a percentage >= 0, got {max_regression_pct!r}",
            hint="For example --max-regression 10",
        )
    current_checks, base_checks = _checks(receipt, "current"), _checks(baseline, "baseline")
    for what, get in (("shape", _shape), ("GPU model", _gpu_model)):
        mine, theirs = get(receipt), get(baseline)
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
            if _is_number(base.get("measured")):
                missing.append({"id": key[0], "gpu": key[1]})
            continue
        result = _compare_check(cur, base, max_regression_pct)
        if result is not None:
            results.append(result)
        elif cur.get("measured") != base.get("measured") and base.get("measured") is not None:
            changed.append(
                {
                    "id": key[0],
                    "gpu": key[1],
                    "current": cur.get("measured"),
                    "baseline": base.get("measured"),
                }
            )
    new = [
        {"id": k[0], "gpu": k[1]}
        for k, c in current_checks.items()
        if k not in base_checks and _is_number(c.get("measured"))
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
            k: baseline.get(k) for k in ("image", "host", "profile", "shape") if k in baseline
        },
        "shape_verified": bool(_shape(receipt) and _shape(baseline)),
        "gpu_verified": bool(_gpu_model(receipt) and _gpu_model(baseline)),
    }
    if receipt.get("profile") != baseline.get("profile"):
        details["profile_mismatch"] = [receipt.get("profile"), baseline.get("profile")]
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
        CheckResult(
            id="baseline.summary",
            title="This run against the baseline receipt",
            severity=severity,
            outcome=outcome,
            measured=len(failed),
            unit="regressions",
            details=details,
            message=message,
        )
    )
    return results
