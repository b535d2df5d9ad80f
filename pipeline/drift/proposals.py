"""Check proposed pins with the compatibility engine before anything is written.

Changes are tried in order (driver first, so a newer CUDA may rely on a newer driver);
each is accepted when, together with those accepted before it, it introduces no error
that the current pins do not already have. A rejected change keeps ``blocked_by`` (the
rule ids): it is reported, never written.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from imagectl.compat.data import CompatData
from imagectl.compat.engine import Combination, evaluate
from imagectl.core.errors import UserError
from imagectl.drift.findings import PinChange
from imagectl.stacks.resolve import ResolvedStack

UNKNOWN = "UNKNOWN-TO-COMPAT-DATA"


def _combination(resolved: ResolvedStack, pins: dict[str, str], as_of: dt.date) -> Combination:
    n = resolved.stack.nvidia
    assert n is not None
    driver = pins.get("nvidia.driver.version", n.driver.version)
    return Combination(
        driver=driver,
        cuda=pins.get("nvidia.cuda", n.cuda),
        nccl=pins.get("nvidia.nccl", n.nccl),
        fabric_manager=driver if resolved.fabric_manager is not None else None,
        fabric_manager_mode=n.fabric_manager,
        gpus=tuple(resolved.stack.gpus),
        kernel_modules=n.driver.kernel_modules,
        as_of=as_of,
    )


def _errors(combo: Combination, data: CompatData) -> set[str]:
    try:
        return {v.rule for v in evaluate(combo, data) if v.is_error}
    except UserError:  # e.g. a CUDA release the compatibility table does not know yet
        return {UNKNOWN}


def check(
    resolved: ResolvedStack, data: CompatData, changes: list[PinChange], as_of: dt.date
) -> list[PinChange]:
    if resolved.stack.nvidia is None:
        return changes  # nothing for the GPU engine to judge (the Debian stack)
    before = _errors(_combination(resolved, {}, as_of), data)
    accepted: dict[str, str] = {}
    out = []
    for change in changes:
        trial = {**accepted, change.dotted: change.proposed}
        new = sorted(_errors(_combination(resolved, trial, as_of), data) - before)
        if new:
            out.append(dataclasses.replace(change, blocked_by=tuple(new)))
        else:
            accepted = trial
            out.append(change)
    return out
