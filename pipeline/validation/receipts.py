"""Receipts as the decision reads them: loaded by the validator's own reader (a typed
``Receipt``), then bound to the candidate (the receipt must name this image and this
stack digest)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.validation.classify import is_image_level
from imagectl.validators.receipt import Receipt, load_receipt
from imagectl.validators.results import CheckResult


class ReceiptRejected(Exception):
    """A receipt that does not belong to this candidate, or is not a receipt at all."""


@dataclass(frozen=True)
class HostOutcome:
    """What one host produced: a bound receipt, or the reason there is none."""

    host: str
    instance_id: str = ""
    receipt: Receipt | None = None
    problem: str | None = None
    slot: int = 0

    @property
    def failed_checks(self) -> list[CheckResult]:
        return self.receipt.failed_checks if self.receipt is not None else []

    @property
    def image_level_failures(self) -> set[str]:
        return {c.id for c in self.failed_checks if is_image_level(c)}

    @property
    def hardware_failures(self) -> set[str]:
        return {c.id for c in self.failed_checks if not is_image_level(c)}

    @property
    def passed(self) -> bool:
        return self.receipt is not None and self.receipt.passed


def bind(receipt: Receipt, *, image_id: str, stack_digest: str) -> Receipt:
    """Refuse a receipt naming another image or another pin set."""
    named_image = receipt.image_id
    if named_image != image_id:
        raise ReceiptRejected(f"the receipt names image {named_image!r}, not {image_id!r}")
    named_digest = receipt.stack_digest
    if named_digest != stack_digest:
        raise ReceiptRejected(
            f"the receipt names stack digest {str(named_digest)[:12]!r}, not {stack_digest[:12]!r}"
        )
    return receipt


def load_bound(
    path: Path, *, host: str, instance_id: str, slot: int, image_id: str, stack_digest: str
) -> HostOutcome:
    """The host's outcome from its fetched receipt file (missing / corrupt / foreign: none)."""
    if not path.is_file():
        return HostOutcome(host, instance_id, None, "no receipt came back", slot)
    try:
        data = load_receipt(path)
    except UserError as exc:
        return HostOutcome(host, instance_id, None, f"receipt unreadable: {exc.render()}", slot)
    try:
        bound = bind(data, image_id=image_id, stack_digest=stack_digest)
    except ReceiptRejected as exc:
        return HostOutcome(host, instance_id, None, f"receipt rejected: {exc}", slot)
    return HostOutcome(host, instance_id, bound, None, slot)


@dataclass
class Summary:
    """Per-host lines for reports: host, instance, verdict or problem, failed checks."""

    rows: list[dict[str, object]] = field(default_factory=list)
