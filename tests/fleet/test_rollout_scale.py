"""The rollout decision at fleet scale: 10,000 nodes' answers, as the JSON bodies
Prometheus sends to the rollout's queries (``benchmarks/rollout_decision.py``'s fleet),
parsed, made into nodes and decided, advance the healthy candidate.

How long that takes is the benchmark's to measure and print (``make bench``: wall and CPU
time, nodes per second, the ratio to the 2 s goal), never a unit test's to assert: a timed
test is red whenever the machine beside it is busy."""

from __future__ import annotations

import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_ten_thousand_nodes_decide_advance() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import rollout_decision as bench
    finally:
        sys.path.remove(str(BENCHMARKS))
    now = time.time()
    answers = bench.bodies(bench.fleet(10_000, now), now)
    assert sum(len(b) for b in answers.values()) > 5_000_000  # really 10,000 nodes' answers
    assert bench.decide_in_memory(answers, now) == "advance"
