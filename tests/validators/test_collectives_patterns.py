"""The value patterns against the collectives' definitions, computed here in plain torch.

If a pattern and its expectation disagreed, a healthy cluster would fail; if the check
ignored an element, a corrupted one would pass. Both directions are exercised, with the
chunked generation forced to split (a 16 GiB buffer is checked in chunks on a GPU).
"""

from __future__ import annotations

import os

import pytest

from imagectl.validators.collectives import patterns
from imagectl.validators.collectives.arithmetic import OPS

torch = pytest.importorskip("torch") if os.environ.get("CI") != "true" else __import__("torch")


def semantics(op, sends, rank, n):
    m = sends[0].numel() // n if op != "all_gather" else sends[0].numel()
    if op == "all_reduce":
        return sum(sends)
    if op == "all_gather":
        return torch.cat(sends)
    if op == "reduce_scatter":
        return sum(sends)[rank * m : (rank + 1) * m]
    if op == "broadcast":
        return sends[0].clone()
    return torch.cat([s[rank * m : (rank + 1) * m] for s in sends])  # all_to_all


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("op", OPS)
def test_patterns_match_the_collective_and_catch_one_bad_element(monkeypatch, op, n):
    monkeypatch.setattr(patterns, "CHUNK", 7)  # force several chunks
    count = 10 * n
    sends = [patterns.inputs(torch, op, count, r, n, "cpu") for r in range(n)]
    for rank in range(n):
        got = semantics(op, sends, rank, n)
        assert patterns.check(torch, op, got, count, rank, n) is None
        assert torch.equal(got, patterns.expected(torch, op, count, rank, n, "cpu"))
        got[count // n - 1] += 1.0  # one element, in the second chunk or later
        bad = patterns.check(torch, op, got, count, rank, n)
        assert bad == {
            "mismatches": 1,
            "first_index": count // n - 1,
            "got": float(got[count // n - 1]),
            "expected": float(got[count // n - 1]) - 1.0,
        }


def test_every_rank_contributes_distinct_values():
    # Were two ranks to send the same data, a missing rank could go unnoticed.
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        a, b = (patterns.inputs(torch, op, 40, r, 4, "cpu") for r in (1, 2))
        assert not torch.equal(a, b), op
