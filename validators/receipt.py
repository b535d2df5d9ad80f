"""The receipt: the machine-readable result of one validation run, bound to the image.

Versioned schema (``schema/receipt.schema.json``, generated from ``Receipt`` and kept in
sync by a test). ``Receipt`` is the contract between the validator and the controller:
the cloud validation run binds it to the candidate, the catalog stores it and hands it
back as ``ValidationRun.body``, the promotion gate and drift judge its fields. Files are
read only through ``load_receipt`` and stored bodies through ``parse_receipt``; both refuse
a corrupt, truncated or foreign receipt with one paragraph (exit 2).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write
from imagectl.validators.coverage import Coverage
from imagectl.validators.jsonfile import read_json
from imagectl.validators.results import Action, CheckResult, Outcome

SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).parent / "schema" / "receipt.schema.json"


def receipt_time(value: str) -> dt.datetime:
    """A receipt's ISO 8601 time as an aware datetime: a time without a zone is UTC, and a
    trailing ``Z`` is read on Python 3.10 too (whose ``fromisoformat`` lacks it)."""
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    parsed = dt.datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


class GpuSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int
    name: str | None = None
    uuid: str | None = None
    bus: str | None = None
    outcome: Literal["pass", "fail", "warn"]
    failed_checks: list[str] = Field(default_factory=list)
    worst_action: Action = Action.NONE


class Receipt(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    kind: Literal["imagectl.validation-receipt"] = "imagectl.validation-receipt"
    image_id: str | None = Field(default=None, description="the image validated (cloud image id)")
    stack: str | None = None
    stack_digest: str | None = None
    validator_version: str
    profile: Literal["boot", "quick", "full", "burn"]
    started_at: str = Field(description="ISO 8601, UTC")
    finished_at: str = Field(description="ISO 8601, UTC")
    duration_s: float
    mode: Literal["live", "replay"]
    sandbox: bool = Field(
        default=False,
        description="a try-it replay (--sandbox): the promotion gate accepts a replay receipt "
        "only when this is set, and records that it did",
    )
    snapshot: str | None = Field(default=None, description="the snapshot replayed, if any")
    host: dict[str, Any] = Field(description="host facts: hostname, kernel, OS, driver, cloud")
    expectations: dict[str, Any]
    gpus: list[GpuSummary]
    checks: list[CheckResult]
    coverage: Coverage | None = Field(
        default=None,
        description="required vs ran for the profile on this shape (validators/coverage.py); "
        "absent in receipts of validators before 0.2",
    )
    summary: dict[str, int] = Field(description="number of checks per outcome")
    verdict: Literal["pass", "fail"]
    worst_action: Action

    @field_validator("started_at", "finished_at")
    @classmethod
    def _iso_time(cls, value: str) -> str:
        receipt_time(value)  # a ValueError names the field
        return value

    @property
    def finished(self) -> dt.datetime:
        return receipt_time(self.finished_at)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def failed_checks(self) -> list[CheckResult]:
        """Checks that count against the host: fail and error (never a pass)."""
        return [c for c in self.checks if c.failed]


def verdict_of(checks: list[CheckResult]) -> tuple[str, Action]:
    failing = [c for c in checks if c.failed]
    return ("fail" if failing else "pass"), Action.worst([c.action for c in failing])


def summarise(checks: list[CheckResult]) -> dict[str, int]:
    return {o.value: sum(1 for c in checks if c.outcome == o) for o in Outcome}


def gpu_summaries(gpus: list[dict[str, object]], checks: list[CheckResult]) -> list[GpuSummary]:
    out = []
    for g in gpus:
        mine = [c for c in checks if c.gpu == g["index"]]
        failing = [c for c in mine if c.failed]
        outcome: Literal["pass", "fail", "warn"] = (
            "fail"
            if failing
            else "warn"
            if any(c.outcome == Outcome.WARN for c in mine)
            else "pass"
        )
        out.append(
            GpuSummary(
                index=g["index"],
                name=g.get("name"),
                uuid=g.get("uuid"),
                bus=g.get("bus"),
                outcome=outcome,
                failed_checks=sorted({c.id for c in failing}),
                worst_action=Action.worst([c.action for c in failing]),
            )
        )
    return out


def receipt_schema() -> dict[str, object]:
    schema = Receipt.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://imagectl.dev/schemas/receipt-v1.json"
    schema["title"] = "imagectl validation receipt, version 1"
    return schema


def write_receipt(receipt: Receipt, path: Path) -> None:
    """The receipt, whole or not at all (a full disk leaves no partial or .tmp file)."""
    atomic_write(path, receipt.model_dump_json(indent=2) + "\n")


def parse_receipt(data: object, *, where: str) -> Receipt:
    try:
        return Receipt.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
        raise UserError(
            f"not a valid receipt: {loc}: {first['msg']}{more}",
            where=where,
            hint="Receipts follow imagectl/validators/schema/receipt.schema.json; regenerate it "
            "with `imagectl validate -o FILE`",
        ) from exc


def load_receipt(path: str | Path) -> Receipt:
    """Read and validate a receipt; corrupt, truncated or foreign files raise UserError."""
    path = Path(path)
    data = read_json(path, "receipt", "Use the receipt written by `imagectl validate -o FILE`")
    return parse_receipt(data, where=str(path))
