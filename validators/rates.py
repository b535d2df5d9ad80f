"""Counters judged as rates: what DCGM's health watch allows per minute.

PCIe replays: DCGM (v4.4.1, ``modules/health/DcgmHealthWatch.cpp``
``GetExpectedPcieReplayRate``) allows ``ceil(BER x line rate x 60 x lanes)`` replays per
minute, with a bit error rate of 1e-12 (``thresholds.yaml`` ``pcie.replay_ber``) and the
generation's line rate below; more fail (``DCGM_FR_PCI_REPLAY_RATE``).
"""

from __future__ import annotations

import math

# Gb/s per lane by PCIe generation (DcgmHealthWatch.cpp pcieGenReplayRatePerLane comments)
LINE_RATE_GBPS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def pcie_replay_limit_per_min(gen: int, width: int, ber: float) -> int:
    """Replays per minute DCGM's health watch allows on a Gen ``gen`` x ``width`` link
    (a generation above the table is capped at the table's last, as DCGM does)."""
    rate = LINE_RATE_GBPS[min(max(int(gen), 1), max(LINE_RATE_GBPS))]
    return math.ceil(ber * rate * 1e9 * 60 * int(width))


def per_minute(count: float, seconds: float) -> float:
    return count * 60.0 / seconds if seconds > 0 else float(count)
