"""Receipts in, decision out: validated / blocked / host_problem / inconclusive.

Pure: no cloud, no catalog, no I/O. The rules, in order:

1. No host at all, or any host without a (bound) receipt: ``inconclusive`` (the
   validator crashed, the host was unreachable, timed out, or sent a foreign receipt).
   Never ``validated``.
2. Every host failed, and they share at least one image-level check (software
   conformance, driver, CUDA, NCCL, collectives, image hygiene): ``blocked`` with those
   checks as reasons.
3. Some hosts failed, but not with an image-level failure shared by all: a host
   problem. Those hosts are retried on fresh hosts (the orchestration bounds the
   retries); the image is not blocked, the bad hosts are reported.
4. Every host passed: ``validated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from imagectl.catalog.lifecycle import ImageState
from imagectl.validation.receipts import HostOutcome

VALIDATED = ImageState.VALIDATED.value
BLOCKED = ImageState.BLOCKED.value
HOST_PROBLEM = "host_problem"
INCONCLUSIVE = ImageState.INCONCLUSIVE.value


@dataclass(frozen=True)
class BadHost:
    """A host whose checks failed where the image is not to blame (retried on a fresh
    host, or named as the node at fault in a multi-node run)."""

    host: str
    instance_id: str
    failed_checks: tuple[str, ...]
    hardware: tuple[str, ...]  # the failures that are the hardware's
    image_level: tuple[str, ...]  # the failures that would be the image's on every host

    def to_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "instance_id": self.instance_id,
            "failed_checks": list(self.failed_checks),
            "hardware": list(self.hardware),
            "image_level": list(self.image_level),
        }


@dataclass(frozen=True)
class Decision:
    verdict: str
    reasons: list[str] = field(default_factory=list)
    retry_hosts: list[str] = field(default_factory=list)
    bad_hosts: list[BadHost] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "reasons": self.reasons,
            "retry_hosts": self.retry_hosts,
            "bad_hosts": [b.to_dict() for b in self.bad_hosts],
        }


def _messages(outcomes: Sequence[HostOutcome], check_ids: set[str]) -> list[str]:
    out = []
    for check_id in sorted(check_ids):
        message = ""
        for o in outcomes:
            for c in o.failed_checks:
                if c.id == check_id and c.message:
                    message = c.message
                    break
            if message:
                break
        out.append(f"{check_id}: {message}" if message else check_id)
    return out


def decide(outcomes: Sequence[HostOutcome]) -> Decision:
    if not outcomes:
        return Decision(INCONCLUSIVE, ["no host was validated"])
    missing = [o for o in outcomes if o.receipt is None]
    if missing:
        reasons = [f"{o.host}: {o.problem or 'no receipt'}" for o in missing]
        return Decision(INCONCLUSIVE, reasons)
    failing = [o for o in outcomes if not o.passed]
    if failing and len(failing) == len(outcomes):
        common = set.intersection(*(o.image_level_failures for o in failing))
        if common:
            return Decision(BLOCKED, _messages(failing, common))
    if failing:
        bad = [
            BadHost(
                host=o.host,
                instance_id=o.instance_id,
                failed_checks=tuple(sorted({c.id for c in o.failed_checks})),
                hardware=tuple(sorted(o.hardware_failures)),
                image_level=tuple(sorted(o.image_level_failures)),
            )
            for o in failing
        ]
        reasons = [f"{b.host}: {', '.join(b.failed_checks) or 'verdict fail'}" for b in bad]
        return Decision(HOST_PROBLEM, reasons, [o.host for o in failing], bad)
    return Decision(VALIDATED, [f"{len(outcomes)} host(s) passed"])
