"""What a profile must run on this kind of shape, and whether the receipt shows it ran.

The requirement is data (``data/coverage.yaml``): per kind of shape (no-gpu, single-gpu,
multi-gpu, nvswitch) the check ids a loaded profile (quick, full, burn) must produce, and
which of them must report every GPU. ``coverage`` compares the run's results with it and
returns the receipt's ``coverage`` section plus the ``validation.coverage`` result:

- live run: any required check missing, skipped or errored fails with BLOCK_IMAGE (the
  receipt cannot prove the image works, so the image may not be promoted on it);
- replay: measurements are not replayed, so the required checks that did not run make the
  result a skip that says so (the gate refuses replay receipts on its own rule);
- boot: no GPU work is required (the boot checks always run).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from imagectl.validators.catalogs import _load
from imagectl.validators.expectations import Expectations
from imagectl.validators.registry import ALL_PROFILES, Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

CHECK_ID = "validation.coverage"
declare(
    CHECK_ID, "Every check the profile requires on this shape ran",
    runs=Runs.SESSION, action=Action.BLOCK_IMAGE, profiles=ALL_PROFILES,
)  # fmt: skip


class Coverage(BaseModel):
    """The receipt's proof of what ran (``receipt.coverage``)."""

    model_config = ConfigDict(extra="forbid")

    profile: str
    shape_kind: str = Field(description="no-gpu | single-gpu | multi-gpu | nvswitch")
    device: str | None = Field(default=None, description="where the GPU work ran: cuda | cpu")
    required: list[str] = Field(default_factory=list)
    ran: list[str] = Field(default_factory=list, description="required checks with a verdict")
    not_run: dict[str, str] = Field(
        default_factory=dict, description="required check -> why it has no verdict"
    )
    nccl: str | list[str] | None = Field(
        default=None, description="the NCCL version the collectives ran (collective.nccl_version)"
    )
    toolkit: dict[str, Any] | None = Field(
        default=None, description="the validator toolkit that ran the GPU work (torch, cuda)"
    )

    @property
    def complete(self) -> bool:
        return not self.not_run


@lru_cache(maxsize=1)
def requirements() -> dict[str, Any]:
    doc: dict[str, Any] = _load("coverage.yaml")
    return doc


def profile_strength(profile: str) -> int:
    order: list[str] = requirements()["strength"]
    return order.index(profile) if profile in order else -1


def shape_kind(expect: Expectations, gpus_seen: int = 0) -> str:
    """The kind of shape; without a shape (the image's own expect.json) the GPUs NVML saw."""
    if not expect.names_gpus:
        return "no-gpu"
    count = expect.gpu_count or gpus_seen or 1
    if count == 1:
        return "single-gpu"
    return "nvswitch" if expect.hardware is not None and expect.hardware.nvswitch else "multi-gpu"


def required_checks(profile: str, expect: Expectations, gpus_seen: int = 0) -> list[str]:
    req = requirements()
    if profile not in req["loaded_profiles"]:
        return []
    out = list(req["kinds"][shape_kind(expect, gpus_seen)])
    for pin, checks in (req.get("when_pinned") or {}).items():
        if getattr(expect, pin, None):
            out += [c for c in checks if c not in out]
    out += [c for c in fabric_checks(expect) if c not in out]
    return out


def fabric_checks(expect: Expectations) -> list[str]:
    """The fabric checks required on this shape: its NICs' fabric, when the image pins that
    fabric's software (``when_fabric``); a fabric whose software has no pin in the stack
    (RoCE with gIB, gVNIC with GPUDirect-TCPX/O) always: its GPU network is judged on every
    image, never left unjudged for want of a pin."""
    nics = expect.hardware.nics if expect.hardware is not None else None
    if nics is None:
        return []
    net = expect.network
    pinnable = nics.fabric in type(net).model_fields
    if pinnable and net.pins(nics.fabric) is None:
        return []
    checks: list[str] = list((requirements().get("when_fabric") or {}).get(nics.fabric) or [])
    if net.infiniband is not None and not net.infiniband.peermem:
        checks = [c for c in checks if c != "fabric.ib.peermem"]
    return checks


def _why_not(check_id: str, results: list[CheckResult], gpus: int) -> str | None:
    mine = [r for r in results if r.id == check_id]
    if not mine:
        return "no result"
    errored = [r for r in mine if r.outcome is Outcome.ERROR]
    if errored:
        return f"error: {errored[0].message}"
    judged = [r for r in mine if r.outcome is not Outcome.SKIP]
    if not judged:
        return f"skipped: {mine[0].message}"
    if check_id in requirements()["per_gpu"] and gpus > 1:
        seen = {r.gpu for r in judged}
        missing = sorted(set(range(gpus)) - {g for g in seen if g is not None})
        if missing and None not in seen:
            return f"no verdict for GPU(s) {missing}"
    return None


def coverage(
    profile: str,
    expect: Expectations,
    results: list[CheckResult],
    *,
    device: str | None,
    replay: bool,
    toolkit: dict[str, Any] | None = None,
    gpus_seen: int = 0,
) -> tuple[Coverage, CheckResult]:
    required = required_checks(profile, expect, gpus_seen)
    gpus = (expect.gpu_count or gpus_seen) if device == "cuda" else 0
    not_run: dict[str, str] = {}
    for check_id in required:
        why = _why_not(check_id, results, gpus)
        if why is not None:
            not_run[check_id] = why
    nccl = next((r.measured for r in results if r.id == "collective.nccl_version"), None)
    cov = Coverage(
        profile=profile,
        shape_kind=shape_kind(expect, gpus_seen),
        device=device,
        required=required,
        ran=[c for c in required if c not in not_run],
        not_run=not_run,
        nccl=nccl,
        toolkit=toolkit,
    )
    common: dict[str, Any] = {
        "id": CHECK_ID,
        "expected": required,
        "measured": cov.ran,
        "source": f"validators/data/coverage.yaml ({cov.shape_kind}, profile {profile})",
        "details": {"not_run": not_run},
    }
    if not required:
        result = check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            message=f"profile {profile} requires no GPU work on a {cov.shape_kind} shape",
        )
    elif not not_run:
        result = check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            message=f"all {len(required)} required checks ran",
        )
    elif replay:
        result = check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.SKIP,
            message=f"replay: {len(not_run)} of {len(required)} required checks are measurements "
            "a snapshot does not hold; a replay receipt does not prove the image works",
        )
    else:
        listed = "; ".join(f"{k} ({v})" for k, v in sorted(not_run.items())[:6])
        more = f" and {len(not_run) - 6} more" if len(not_run) > 6 else ""
        result = check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.BLOCK_IMAGE,
            message=f"{len(not_run)} of {len(required)} required checks did not run: "
            f"{listed}{more}",
        )
    return cov, result
