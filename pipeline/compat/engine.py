"""Evaluate a pin combination against the compatibility rules.

``Combination`` is what is judged (from a stack, or typed on the command line;
``combination.py``). ``evaluate`` runs every rule's evaluator and returns
``Violation``s carrying the rule's id, severity, message, fix and source. The
evaluators, one per rule id, are in ``checks.py``; the rule texts are data
(images/compat/rules.yaml).
"""

from __future__ import annotations

from imagectl.compat.checks import EVALUATORS
from imagectl.compat.combination import Combination, Violation
from imagectl.compat.data import CompatData
from imagectl.core.errors import UserError

__all__ = ["Combination", "Violation", "evaluate"]


def evaluate(combo: Combination, data: CompatData) -> list[Violation]:
    missing = sorted(set(data.rules) - set(EVALUATORS))
    if missing:
        raise UserError(
            f"rules without an evaluator: {', '.join(missing)}",
            hint="Add them to pipeline/compat/checks.py or remove them from rules.yaml",
        )
    # Resolve GPUs first so an unknown name is exit 2, not a rule violation.
    for sku in combo.gpus:
        data.gpu(sku)
    data.cuda_entry(combo.cuda)
    out: list[Violation] = []
    for rule_id, rule in data.rules.items():
        out.extend(EVALUATORS[rule_id](combo, data, rule))
    return out
