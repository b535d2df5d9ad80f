"""GPU-side judgement of the smoke figures (the CPU run cannot reach these branches):
floors, the NVLink matrix with a single slow pair, and missing peer access."""

from __future__ import annotations

from imagectl.validators.compute.checks import floor_check, p2p_check
from imagectl.validators.compute.floors import floors_for
from imagectl.validators.results import Action, Outcome

H100 = floors_for("H100-SXM-80GB")


def matrix(n, gbps, slow=None, no_access=None):
    pairs = []
    for s in range(n):
        for d in range(n):
            if s != d:
                entry = {"src": s, "dst": d, "peer_access": (s, d) != no_access}
                if entry["peer_access"]:
                    entry["gbps"] = 150.0 if (s, d) == slow else gbps
                pairs.append(entry)
    return pairs


def test_one_slow_pair_is_named():
    check = p2p_check(matrix(4, 380.0, slow=(2, 3)), H100, nvswitch=True)
    assert check.outcome is Outcome.FAIL and check.action is Action.DRAIN
    assert "2->3 150 GB/s" in check.message and "1 pair(s)" in check.message
    assert check.measured == 150.0 and check.expected == 335
    assert [p["ok"] for p in check.details["pairs"] if (p["src"], p["dst"]) == (2, 3)] == [False]


def test_healthy_matrix_passes_and_missing_peer_access_fails_on_nvswitch():
    assert p2p_check(matrix(4, 380.0), H100, nvswitch=True).outcome is Outcome.PASS
    check = p2p_check(matrix(4, 380.0, no_access=(0, 1)), H100, nvswitch=True)
    assert check.outcome is Outcome.FAIL and "0->1" in check.message
    # A PCIe SKU without peer access at all: nothing to measure, not a fault.
    pcie = [dict(p, peer_access=False) for p in matrix(2, 0.0)]
    for p in pcie:
        p.pop("gbps", None)
    assert p2p_check(pcie, {}, nvswitch=False).outcome is Outcome.SKIP


def test_floor_check_on_gpu():
    floor = H100["hbm_gbps"]
    low = floor_check(
        check_id="cuda.hbm_bandwidth",
        measured=1500.0,
        unit="GB/s",
        floor=floor,
        device="cuda",
        gpu=3,
    )
    assert low.outcome is Outcome.FAIL and low.gpu == 3 and low.expected == 1905
    assert "DCGM" in low.source
    ok = floor_check(
        check_id="cuda.hbm_bandwidth",
        measured=2600.0,
        unit="GB/s",
        floor=floor,
        device="cuda",
        gpu=3,
    )
    assert ok.outcome is Outcome.PASS
    none = floor_check(
        check_id="cuda.hbm_bandwidth",
        measured=500.0,
        unit="GB/s",
        floor=None,
        device="cuda",
        gpu=0,
    )
    assert none.outcome is Outcome.WARN and "no floor" in none.message
