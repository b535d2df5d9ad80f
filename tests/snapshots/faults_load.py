"""Fault classes: ECC semantics, DCGM's own verdicts, PCIe replay rates and the evidence
taken under load. Each verdict is written from NVIDIA's
documents, cited in ``source``:

- ECC (GPU Memory Error Management, "RMA Policy Thresholds for SRAM Failure Modes"; NVML
  nvmlDeviceGetSramEccErrorStatus): SRAM RMA follows NVIDIA's threshold flag, corrected
  counts are never an RMA criterion, uncorrected errors rising during one run are a rate.
- DCGM (dcgmlib/dcgm_errors.h v4.4.1): a code's action is its next step; a runtime error
  by its code; the level that ran must be the profile's; a Skip keeps its code.
- PCIe replays (DCGM health watch, DcgmHealthWatch.cpp GetExpectedPcieReplayRate): a rate
  per minute for the link's generation and width.
- Load evidence: the snapshot's ``load`` section (samples under load) judged in replay.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from snaplib import AGGREGATE, ROOT, SRAM, Fault, Snap, U, both, gpu_set

from imagectl.validators.nvml.calls import CORRECTED, DRAM

RECORDINGS = ROOT / "tests" / "fixtures" / "dcgm" / "recordings"
MEM_MAX_MHZ = {  # NVML max memory clock per SKU (nvidia-smi -q, Max Clocks / Memory)
    "NVIDIA H100 80GB HBM3": 2619,
    "NVIDIA H200": 3201,
    "NVIDIA A100-SXM4-80GB": 1593,
    "NVIDIA L4": 6251,
}
SRAM_RMA = (
    "NVIDIA GPU Memory Error Management, RMA Policy Thresholds for SRAM Failure Modes (the "
    "SRAM Threshold Exceeded flag: more than 2 SEC-DED or 4 parity unique uncorrectable "
    "errors in one address bank); NVML nvmlDeviceGetSramEccErrorStatus "
    "(nvmlEccSramErrorStatus_v1_t.bThresholdExceeded); DCGM DCGM_FR_SRAM_THRESHOLD"
)
DCGM_H = "NVIDIA/DCGM v4.4.1 dcgmlib/dcgm_errors.h"
REPLAY_RATE = (
    "NVIDIA DCGM v4.4.1 health watch (modules/health/DcgmHealthWatch.cpp "
    "GetExpectedPcieReplayRate): ceil(1e-12 x line rate x 60 x lanes) replays per minute "
    "(Gen5 x16: 31, Gen4 x16: 16); more is DCGM_FR_PCI_REPLAY_RATE, next step 'Reconnect "
    "PCIe card...' (hands: DRAIN)"
)
NO_REASON = (
    "NVML API reference: nvmlClocksEventReasonNone (0) 'clocks are as high as possible'; an "
    "SM clock under 90% of nvmlDeviceGetMaxClockInfo(SM) under load with no reason set is "
    "a slowdown the GPU does not explain (imagectl policy: load.sm_clock_min_fraction, "
    "DRAIN for a person to look)"
)


def sram_status(threshold: int = 0, cor: int = 0, sec_ded: int = 0) -> dict[str, int]:
    """nvmlEccSramErrorStatus_v1_t as nvmlDeviceGetSramEccErrorStatus fills it."""
    return {
        "aggregateUncParity": 0,
        "aggregateUncSecDed": sec_ded,
        "aggregateCor": cor,
        "volatileUncParity": 0,
        "volatileUncSecDed": 0,
        "volatileCor": 0,
        "aggregateUncBucketL2": sec_ded,
        "aggregateUncBucketSm": 0,
        "aggregateUncBucketPcie": 0,
        "aggregateUncBucketMcu": 0,
        "aggregateUncBucketOther": 0,
        "bThresholdExceeded": threshold,
    }


def dcgm(name: str) -> Callable[[Snap], None]:
    """The snapshot's ``dcgm`` section: a recorded ``dcgmi diag`` run (tests/fixtures/dcgm)."""

    def apply(s: Snap) -> None:
        s["dcgm"] = json.loads((RECORDINGS / f"{name}.json").read_text())

    return apply


def _device(s: Snap, i: int) -> dict[str, Any]:
    common = s["nvml"].get("common") or {}
    dev: dict[str, Any] = {**common, **s["nvml"]["devices"][i]}
    return dev


def loaded(
    seconds: float = 10.0, interval_s: float = 0.25, **per_gpu: dict[str, Any]
) -> Callable[[Snap], None]:
    """A ``load`` section as ``Sampler.recording`` writes it: every GPU busy with GEMMs,
    SM and memory clocks at their maxima, no clock-event reason, the link at its maximum.
    ``per_gpu``: ``gpu<N>={"sample": {...}, "start": {...}, "end": {...}}`` overrides."""

    def apply(s: Snap) -> None:
        gpus = []
        n = int(seconds / interval_s)
        for i in range(len(s["nvml"]["devices"])):
            d = _device(s, i)
            sm_max = int(d["nvmlDeviceGetMaxClockInfo"]["1"])
            mem_max = MEM_MAX_MHZ[d["nvmlDeviceGetName"]]
            power_w = d["nvmlDeviceGetEnforcedPowerLimit"] / 1000.0
            over = per_gpu.get(f"gpu{i}", {})
            sample = {
                "util": 100,
                "sm_mhz": sm_max,
                "mem_mhz": mem_max,
                "reasons": 0,
                "temp_c": 61 + i % 4,
                "power_w": round(power_w * 0.82, 1),
                "pcie_gen": int(d["nvmlDeviceGetMaxPcieLinkGeneration"]),
                "pcie_width": int(d["nvmlDeviceGetMaxPcieLinkWidth"]),
                **over.get("sample", {}),
            }
            counters = {"ecc_uncorrected": 0, "ecc_corrected": 0, "pcie_replay": 0}
            t0 = 1_790_003_700.0
            gpus.append(
                {
                    "index": i,
                    "sm_max_mhz": sm_max,
                    "mem_max_mhz": mem_max,
                    "slowdown_c": int(d["nvmlDeviceGetTemperatureThreshold"]["1"]),
                    "start": {"t": t0, **counters, **over.get("start", {})},
                    "end": {"t": t0 + seconds, **counters, **over.get("end", {})},
                    "samples": [
                        {"t": round(k * interval_s, 3), **copy.deepcopy(sample)} for k in range(n)
                    ],
                }
            )
        s["load"] = {
            "load_s": seconds,
            "interval_s": interval_s,
            "duration_s": seconds,
            "gpus": gpus,
        }

    return apply


FAULTS: dict[str, Fault] = {
    # -- ECC semantics (item 4) -----------------------------------------------------------
    "sram-threshold-exceeded": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        both(
            gpu_set("nvmlDeviceGetSramEccErrorStatus", sram_status(1, cor=40, sec_ded=3), gpu=2),
            gpu_set("nvmlDeviceGetMemoryErrorCounter", 3, gpu=2, key=f"{U},{AGGREGATE},{SRAM}"),
        ),
        {"gpu.ecc.sram": "ISOLATE_RMA"},
        source=f"{SRAM_RMA}: the flag is set, the GPU meets NVIDIA's RMA criteria",
    ),
    "ecc-uncorrected-rising-under-load": Fault(
        ("h100-sxm-8x",),
        loaded(gpu4={"start": {"ecc_uncorrected": 0}, "end": {"ecc_uncorrected": 2}}),
        {"load.ecc": "DRAIN"},
        source="NVIDIA DCGM health watch (MonitorMem): a new volatile uncorrectable error "
        "fails, DCGM_FR_VOLATILE_DBE_DETECTED, next step 'Drain the GPU and reset it or "
        "reboot the node' (dcgm_errors.h); 2 new in 10 s of load: 12 per minute",
        profile="quick",
    ),
    # controls: counts below NVIDIA's RMA criteria are recorded, never an RMA
    "sram-corrected-high-no-threshold": Fault(
        ("h100-sxm-8x",),
        both(
            gpu_set("nvmlDeviceGetSramEccErrorStatus", sram_status(0, cor=250_000), gpu=5),
            gpu_set(
                "nvmlDeviceGetMemoryErrorCounter",
                250_000,
                gpu=5,
                key=f"{CORRECTED},{AGGREGATE},{SRAM}",
            ),
        ),
        {},
        expect_warn=("gpu.ecc.sram",),
        source=f"{SRAM_RMA}: corrected errors are not an RMA criterion and the flag is clear "
        "(a warning: imagectl policy, AzHC's 10,000)",
    ),
    "sram-status-healthy": Fault(
        ("h100-sxm-8x", "h200-8x"),
        gpu_set("nvmlDeviceGetSramEccErrorStatus", sram_status(0, cor=12), gpu=None),
        {},
        source=f"{SRAM_RMA}: a few corrected errors, flag clear: healthy",
    ),
    "dram-corrected-counts-high": Fault(
        ("a100-sxm-80gb-8x",),
        gpu_set(
            "nvmlDeviceGetMemoryErrorCounter",
            30_000_000,
            gpu=6,
            key=f"{CORRECTED},{AGGREGATE},{DRAM}",
        ),
        {},
        expect_warn=("gpu.ecc.dram",),
        source="NVIDIA GPU Memory Error Management, RMA Policy (DRAM): the RMA criterion is the "
        "row-remapping failure flag, not a count of corrected errors (AzHC's 20,000,000 is "
        "imagectl policy: a warning)",
    ),
    # -- DCGM (item 5) ---------------------------------------------------------------------
    "dcgm-uncontained-error": Fault(
        ("h100-sxm-8x",),
        dcgm("h100-8x-r2-uncontained"),
        {"dcgm.memory": "DRAIN"},
        source=f"{DCGM_H}: DCGM_FR_UNCONTAINED_ERROR (81) is severity ISOLATE, but its next "
        "step DCGM_FR_VOLATILE_DBE_DETECTED_NEXT is 'Drain the GPU and reset it or reboot the "
        "node': drain and reset, not RMA",
        profile="quick",
    ),
    "dcgm-nvvs-binary-missing": Fault(
        ("h100-sxm-8x", "h200-8x"),
        dcgm("h100-8x-r2-nvvs-missing"),
        {"dcgm.diag": "BLOCK_IMAGE"},
        source="NVIDIA/DCGM v4.4.1 dcgmlib/dcgm_structs.h DCGM_ST_NVVS_BINARY_NOT_FOUND (-52) "
        "('please install it to /usr/libexec/datacenter-gpu-manager-4/'): the image's DCGM "
        "install is incomplete",
        profile="quick",
    ),
    "dcgm-level2-run-for-full": Fault(
        ("h100-sxm-8x",),
        dcgm("h100-8x-r2-pass"),
        {"dcgm.diag": "BLOCK_IMAGE"},
        source="DCGM User Guide, run levels (r2: software, memory, pcie; r3 adds the stress "
        "tests); validators/data/dcgm.yaml: full runs level 3, so a level-2 run does not "
        "prove it",
        profile="full",
    ),
    "dcgm-targeted-power-skip-low-limit": Fault(
        ("h100-sxm-8x",),
        both(
            dcgm("h100-8x-r3-power-limit-skip"),
            gpu_set("nvmlDeviceGetEnforcedPowerLimit", 500_000, gpu=5),
        ),
        {"dcgm.targeted_power": "DRAIN", "gpu.power.limit": "REBOOT"},
        source=f"{DCGM_H}: targeted_power reports a low enforced power limit as Skip plus "
        "DCGM_FR_ENFORCED_POWER_LIMIT (TargetedPower_wrapper.cpp EnforcedPowerLimitTooLow), "
        "next step 'raise the enforced power limit': the host's limit, not a skip; NVML "
        "nvmlDeviceGetPowerManagementDefaultLimit: a reboot restores the default",
        profile="full",
    ),
    # controls
    "dcgm-r3-pass-full": Fault(
        ("h100-sxm-8x",),
        dcgm("h100-8x-r3-pass"),
        {},
        source="DCGM r3 (the full profile's level) with every test passing",
        profile="full",
    ),
    "dcgm-temp-monitor-full": Fault(
        ("h100-sxm-8x",),
        dcgm("h100-8x-r3-temp-monitor"),
        {},
        expect_warn=("dcgm.targeted_stress", "dcgm.diag"),
        source=f"{DCGM_H}: DCGM_FR_TEMP_VIOLATION is severity MONITOR ('Can perform "
        "workload, but needs to be monitored') against a user-set maximum; dcgmi exits "
        "non-zero for any non-ISOLATE error (dcgmi/Diag.cpp GetFailureResult): a warning",
        profile="full",
    ),
    # -- PCIe replays as a rate (item 8) ---------------------------------------------------
    "pcie-replay-rate-over-dcgm": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetPcieReplayCounter", 400, gpu=6),
        {"gpu.pcie.replay": "DRAIN"},
        source=f"{REPLAY_RATE}: 400 replays in the 300 s since boot is 80 per minute on "
        "Gen5 x16 (limit 31)",
    ),
    "pcie-replays-under-load": Fault(
        ("h100-sxm-8x", "l4-1x"),
        both(
            gpu_set("nvmlDeviceGetPcieReplayCounter", 10, gpu=0),
            loaded(gpu0={"start": {"pcie_replay": 10}, "end": {"pcie_replay": 60}}),
        ),
        {"load.pcie_replay": "DRAIN"},
        source=f"{REPLAY_RATE}: 50 replays in 10 s of load is 300 per minute",
        profile="quick",
    ),
    "pcie-replays-within-rate": Fault(
        ("h100-sxm-8x", "l4-1x"),
        gpu_set("nvmlDeviceGetPcieReplayCounter", 60, gpu=0),
        {},
        source=f"{REPLAY_RATE}: 60 replays in 300 s is 12 per minute, within Gen5 x16's 31 "
        "and Gen4 x16's 16 (the old flat 80 per test is not DCGM's health-watch rule)",
    ),
    # -- evidence under load (item 9) -------------------------------------------------------
    "load-sm-clock-stuck-low": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        loaded(gpu1={"sample": {"sm_mhz": 810}}),
        {"load.sm_clock": "DRAIN"},
        source=f"{NO_REASON}: 810 MHz with no reason in every sample under load",
        profile="quick",
    ),
    "load-hw-power-brake": Fault(
        ("h100-sxm-8x",),
        loaded(gpu2={"sample": {"reasons": 0x80, "sm_mhz": 1100}}),
        {"load.clock_events": "DRAIN", "gpu.load.clock_events": "DRAIN"},
        source="NVML clocks event reasons: HwPowerBrakeSlowdown (0x80) under load is a "
        "hardware slowdown (external power brake); the low SM clock is explained by it",
        profile="quick",
    ),
    "load-pcie-downtrained": Fault(
        ("a100-sxm-80gb-8x",),
        loaded(gpu0={"sample": {"pcie_gen": 3}}),
        {"load.pcie_link": "REBOOT", "gpu.pcie.link_under_load": "DRAIN"},
        source="NVML nvmlDeviceGetCurrPcieLinkGeneration under load below the GPU's maximum "
        "(Gen4): links downtrain only at idle (images/catalog/shapes.yaml)",
        profile="quick",
    ),
    # controls
    "load-healthy": Fault(
        ("h100-sxm-8x", "l4-1x", "h200-8x"),
        loaded(),
        {},
        source="a healthy host's samples under load: clocks at their maxima, no clock-event "
        "reason, link at its maximum, no new ECC error or replay",
        profile="quick",
    ),
    "load-healthy-full": Fault(
        ("h100-sxm-8x",),
        loaded(),
        {},
        source="the same samples replayed with full",
        profile="full",
    ),
    "load-sw-power-cap-low-clock": Fault(
        ("h100-sxm-8x",),
        loaded(**{f"gpu{i}": {"sample": {"reasons": 0x4, "sm_mhz": 1410}} for i in range(8)}),
        {},
        source="NVML clocks event reasons: SwPowerCap (0x4) is normal power management; the "
        "lower SM clock is explained by it",
        profile="quick",
    ),
}
