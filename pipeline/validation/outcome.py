"""What ``imagectl validate-image`` decided about an image, as a typed object.

``validate_image`` (``imagectl.validation.stage``) returns an ``ImageValidationOutcome``;
its callers (the command, ``imagectl run``) read its fields. ``to_dict`` is the JSON edge
(``--json``, the run summary, the JUnit report): the keys the command has always
printed, each shape's runs merged (``ValidationResult.to_dict``'s keys, every host with
its shape).
"""

from __future__ import annotations

from dataclasses import dataclass

from imagectl.validation.decide import Decision
from imagectl.validation.run import ValidationResult, fabric_summary


@dataclass(frozen=True)
class ShapeRun:
    """One shape's validation run."""

    shape: str
    result: ValidationResult


@dataclass(frozen=True)
class ImageValidationOutcome:
    image_id: str
    cloud: str
    stack: str
    state: str  # the image's state now: validated, blocked or inconclusive (ImageState)
    decision: Decision  # the shapes' decisions together (stage.combined)
    runs: tuple[ShapeRun, ...]  # in the order they ran (a block stops the rest)
    receipts: str  # live | replay | sandbox replay (stage.receipt_kind)
    # what the image was judged by: "build <id>" (the expectations its build recorded),
    # or the stack resolved now, for an image whose build recorded none
    expectations_from: str
    toolkit_wheelhouse: str | None = None
    attestation: str | None = None  # the signed attestation's digest (validated only)

    @property
    def shapes(self) -> list[str]:
        return [r.shape for r in self.runs]

    @property
    def verdict(self) -> str:
        return self.decision.verdict

    @property
    def reasons(self) -> list[str]:
        return list(self.decision.reasons)

    @property
    def termination_errors(self) -> dict[str, str]:
        """Instance -> why it could not be terminated (it may still run, and bill)."""
        return {i: e for r in self.runs for i, e in r.result.termination_errors.items()}

    def to_dict(self) -> dict[str, object]:
        """``imagectl validate-image --json``: the decision and every shape's runs."""
        hosts: list[dict[str, object]] = []
        launched: list[dict[str, str]] = []
        terminated: list[str] = []
        fabric: dict[str, dict[str, object]] = {}
        placements: list[dict[str, object]] = []
        for run in self.runs:
            r = run.result
            hosts += [{**h, "shape": run.shape} for h in r.hosts()]
            launched += r.launches()
            terminated += r.terminated
            if (summary := fabric_summary(r.fabric)) is not None:
                fabric[run.shape] = summary
            if r.placement is not None:
                placements.append(r.placement.to_dict())
        return {
            "image_id": self.image_id,
            "cloud": self.cloud,
            "stack": self.stack,
            "shape": ", ".join(self.shapes),
            "state": self.state,
            "receipts": self.receipts,
            "expectations_from": self.expectations_from,
            "toolkit_wheelhouse": self.toolkit_wheelhouse,
            "attestation": self.attestation,
            **self.decision.to_dict(),
            "rounds": sum(run.result.rounds for run in self.runs),
            "hosts": hosts,
            "launched": launched,
            "terminated": terminated,
            "termination_errors": self.termination_errors,
            "fabric": fabric,
            "placements": placements,
        }
