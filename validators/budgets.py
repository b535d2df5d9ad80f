"""Time budgets per profile: one deadline per stage, so that each stage's own deadlines fire
first and diagnose (the collectives' rendezvous and hang deadlines report per rank; DCGM's
hard timeout names the test), and the profile's budget is their sum, never shorter.

- ``boot``: the idle checks (no stress), 30 s.
- ``smoke``: the CUDA smoke tests (cuInit tries, GEMMs, copies, load sampling).
- ``collectives``: the launcher's start (rendezvous) timeout, plus the healthy sweep's
  expected duration, plus one hang deadline (``op_timeout_s``), plus a margin: a hang is
  always caught by the launcher's own deadline before the stage's.
- ``dcgm``: the level's hard timeout (``data/dcgm.yaml``).
"""

from __future__ import annotations

from imagectl.validators.collectives.launch import Plan
from imagectl.validators.collectives.profiles import sweep_for
from imagectl.validators.dcgm.table import tables

BOOT_S = 30.0
JUDGE_S = 10.0  # the checks that judge the load samples, after the GPU work
MARGIN_S = 30.0

SMOKE_S = {
    ("cuda", "quick"): 300.0,
    ("cuda", "full"): 1500.0,
    ("cuda", "burn"): 5400.0,
    ("cpu", "quick"): 120.0,
    ("cpu", "full"): 300.0,
    ("cpu", "burn"): 900.0,
}
# How long a healthy sweep takes (measured: benchmarks/collectives.py on CPU; the GPU
# sweeps of collectives/profiles.py move up to 1 GiB (quick) or 16 GiB (full) per op).
SWEEP_S = {
    ("cuda", "quick"): 120.0,
    ("cuda", "full"): 900.0,
    ("cuda", "burn"): 3600.0,
    ("cpu", "quick"): 60.0,
    ("cpu", "full"): 180.0,
    ("cpu", "burn"): 900.0,
}
DCGM_S = {"quick": 600.0}  # when the DCGM table has no level for the profile


def smoke_s(device: str, profile: str) -> float:
    return SMOKE_S.get((device, profile), SMOKE_S[(device, "quick")])


def collectives_s(device: str, profile: str) -> float:
    sweep = sweep_for(device, profile)
    start = max(Plan.start_timeout_s, sweep.join_timeout_s)
    return start + SWEEP_S[(device, profile)] + sweep.op_timeout_s + MARGIN_S


def dcgm_s(profile: str) -> float:
    """The level's hard timeout (validators/data/dcgm.yaml) plus a margin."""
    level = tables().levels.get(profile)
    return (level.timeout_s if level else DCGM_S["quick"]) + MARGIN_S


def profile_s(device: str, profile: str) -> float:
    """The whole profile's budget: the sum of its stages (boot alone for ``boot``)."""
    if profile == "boot":
        return BOOT_S
    return (
        BOOT_S
        + smoke_s(device, profile)
        + collectives_s(device, profile)
        + dcgm_s(profile)
        + JUDGE_S
    )
