"""What the compatibility rules judge and what they find: ``Combination`` (a pin
combination, from a stack or typed on the command line) and ``Violation`` (a broken
rule with its id, severity, message, fix and source), and ``violation`` that words one
from a rule's text (images/compat/rules.yaml) and the facts an evaluator found."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from imagectl.compat.data import Rule


@dataclass(frozen=True)
class Combination:
    driver: str
    cuda: str
    nccl: str | None = None
    fabric_manager: str | None = None
    fabric_manager_mode: str = "auto"  # auto | required | none (stacks); ad hoc: auto
    gpus: tuple[str, ...] = ()
    kernel_modules: str | None = None
    toolkit_torch: str | None = None  # the validator's GPU toolkit (validation.toolkit)
    toolkit_cuda: str | None = None  # its CUDA variant as X.Y (12.8 -> cu128)
    profile: str | None = None  # validation.profile (stacks only)
    azure_security_type: str | None = None  # clouds.azure.gallery.security_type (stacks)
    as_of: dt.date = field(default_factory=dt.date.today)


@dataclass(frozen=True)
class Violation:
    rule: str
    severity: str
    message: str
    fix: str
    source: str
    field: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


class _Facts(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def violation(rule: Rule, **facts: Any) -> Violation:
    f = _Facts(rule.params)
    f.update(facts)
    return Violation(
        rule=rule.id,
        severity=rule.severity,
        message=rule.message.format_map(f),
        fix=rule.fix.format_map(f),
        source=rule.source,
        field=rule.field,
    )
