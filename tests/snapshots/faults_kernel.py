"""Fault classes 1-4: the kernel log and XIDs, judged as NVIDIA's Xid Catalog says.

1. Kernel-log parsing: XIDs of a MIG instance (the driver prints "GPU-I:05 GPU-CI:00"
   inside the parentheses) are XIDs of that GPU; only the current boot counts (a log
   spanning boots, lines stamped before this boot).
2. The catalog's resolution buckets: IGNORE codes pass (38, 44, 137, 141), RESTART_APP
   codes (8, 32, 68, 69) warn, RESET_GPU codes fail with RESET_GPU, unknown codes fail
   conservatively.
3. Application XIDs (RESTART_APP: 13, 31, 43, 45, ...): one crash warns naming the
   process; a burst of processes on one GPU fails.
4. Incidents, not lines: one NVLink incident on several links is one incident; Xid 48
   with 63/64 is DRAIN_AND_RESET; ISOLATE_RMA only when the previous boot's receipt had
   the same fault on the same GPU (by UUID).

Sources: NVIDIA Xid Catalog, docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
(validators/data/xids.yaml cites it entry by entry).
"""

from __future__ import annotations

from snaplib import Fault, both, log_line, previous_boot_xid, xid_lines

CAT = "NVIDIA Xid Catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"
MIG = "GPU-I:05 GPU-CI:00"

FAULTS: dict[str, Fault] = {
    # -- 1. parsing -------------------------------------------------------------------
    "xid95-mig-instance": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        xid_lines(95, "Uncontained: FBHUB. RST: Yes, D-RST: No", gpu=2, mig=MIG),
        {"kernel.xid": "RESET_GPU"},
        source=(
            f"{CAT}: Xid 95 ROBUST_CHANNEL_UNCONTAINED_ERROR, RESET_GPU; the driver names the "
            "MIG instance inside the parentheses (PCI:0000:2a:00 GPU-I:05 GPU-CI:00)"
        ),
    ),
    "xid79-earlier-boot-only": Fault(
        ("h100-sxm-8x", "h200-8x"),
        both(
            log_line("-- Boot 0a0b0c0d11112222333344445555666 --", stamp=""),
            xid_lines(79, "GPU has fallen off the bus.", gpu=1, stamp="2026-11-19T22:10:00+0000"),
            log_line("-- Boot 9f1c1111222233334444555566667777 --", stamp=""),
            log_line("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05"),
        ),
        {},
        source=(
            f"{CAT}: Xids are judged for the boot they happened in; journalctl -k -b (this "
            "boot), a log spanning boots counts only after its last '-- Boot <id> --' marker"
        ),
    ),
    "xid48-before-this-boot": Fault(
        ("a100-sxm-80gb-8x", "l4-1x"),
        xid_lines(
            48, "An uncorrectable double bit error (DBE).", gpu=0, stamp="2026-09-20T03:00:00+0000"
        ),
        {},
        source=(
            f"{CAT}: Xid 48 is cleared by the reset or reboot; a line stamped before this "
            "boot's start (host.boot.booted_at) belongs to an earlier boot"
        ),
    ),
    # -- 2. the catalog's buckets ----------------------------------------------------------
    "xid38-fecs-watchdog-ignore": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        xid_lines(38, "FECS watchdog timeout.", gpu=4),
        {},
        source=f"{CAT}: Xid 38 ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT, IGNORE",
    ),
    "xid44-ctxsw-fault-ignore": Fault(
        ("h200-8x", "l4-1x"),
        xid_lines(44, "Graphics Engine fault during context switch.", gpu=0),
        {},
        source=f"{CAT}: Xid 44 ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW, IGNORE",
    ),
    "xid137-nvlink-priv-ignore": Fault(
        ("h100-sxm-8x", "h200-8x"),
        xid_lines(137, "NVLink Privilege Error.", gpu=6),
        {},
        source=f"{CAT}: Xid 137 NVLINK_PRIV_ERR, IGNORE (XID_137_FLOW: usually the application)",
        expect_warn=("kernel.xid",),
    ),
    "xid141-fast-path-ignore": Fault(
        ("h100-sxm-8x", "h200-8x"),
        xid_lines(141, "CUDA Fast Path Error.", gpu=5),
        {},
        source=f"{CAT}: Xid 141 ROBUST_CHANNEL_FAST_PATH_ERROR, IGNORE",
    ),
    "xid8-idle-timeout-app": Fault(
        ("a100-sxm-80gb-8x", "l4-1x"),
        xid_lines(8, "GPU stopped processing (idle timeout).", gpu=0, pids=(7311,)),
        {},
        source=f"{CAT}: Xid 8 ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT, RESTART_APP (a warning)",
        expect_warn=("kernel.xid",),
    ),
    "xid69-gr-class-error-app": Fault(
        ("h100-sxm-8x", "h200-8x"),
        xid_lines(69, "Graphics Engine class error.", gpu=7, pids=(9001,), name="trainer"),
        {},
        source=f"{CAT}: Xid 69 ROBUST_CHANNEL_GR_CLASS_ERROR, RESTART_APP (a warning)",
        expect_warn=("kernel.xid",),
    ),
    "xid140-ecc-unrecovered": Fault(
        ("h200-8x", "a100-sxm-80gb-8x"),
        xid_lines(140, "ECC Unrecovered Error.", gpu=3, pids=(0,), name="<unknown>"),
        {"kernel.xid": "RESET_GPU"},
        source=f"{CAT}: Xid 140 UNRECOVERABLE_ECC_ERROR_ESCAPE, RESET_GPU",
    ),
    "xid-uncatalogued": Fault(
        ("h100-sxm-8x", "l4-1x"),
        xid_lines(199, "Unknown error.", gpu=0),
        {"kernel.xid": "RESET_GPU"},
        source=(
            f"{CAT}: a code the catalog does not list is not expected on Ampere and newer; "
            "imagectl resets the GPU (conservative)"
        ),
    ),
    # -- 3. application-attributable XIDs -------------------------------------------------
    "xid13-one-crash": Fault(
        ("h100-sxm-8x", "l4-1x"),
        xid_lines(
            13,
            "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address",
            gpu=0,
            pids=(5150, 5150, 5150, 5150),
            name="train.py",
        ),
        {},
        source=(
            f"{CAT}: Xid 13 ROBUST_CHANNEL_GR_EXCEPTION, RESTART_APP; WORKFLOW_XID_13 'Solo, "
            "no burst: CHECK_APP/CUDA' (one crash prints several lines with one pid)"
        ),
        expect_warn=("kernel.xid",),
    ),
    "xid31-burst": Fault(
        ("a100-sxm-80gb-8x", "h200-8x"),
        xid_lines(
            31,
            "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
            "0x7f1c_80000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
            gpu=5,
            pids=(6001, 6017, 6033),
        ),
        {"kernel.xid": "RESTART_APP"},
        source=(
            f"{CAT}: Xid 31 ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT, RESTART_APP; WORKFLOW_XID_31: "
            "repeat MMU faults on the same GPU point at the hardware; imagectl: 3 processes "
            "in one boot are a burst (xids.yaml app_burst)"
        ),
    ),
    "xid45-after-94": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        both(
            xid_lines(94, "Contained: SM (0x1). RST: No, D-RST: No", gpu=4, pids=(8080,)),
            xid_lines(45, "Ch 00000010, engmask 00000101, intr 10000000", gpu=4, pids=(8080,)),
        ),
        {},
        source=(
            f"{CAT}: Xid 94 ROBUST_CHANNEL_CONTAINED_ERROR, RESTART_APP ('Xid 45 will be seen "
            "in relation to this error'); WORKFLOW_XID_45: not solo, IGNORE"
        ),
        expect_warn=("kernel.xid",),
    ),
    # -- 4. incidents, not lines; cross-boot recurrence ------------------------------------
    "xid74-several-links": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        both(
            *(
                xid_lines(
                    74,
                    f"NVLink: fatal error detected on link {link}(0x0, 0x0, 0x10000, 0x0, 0x0, "
                    "0x0, 0x0)",
                    gpu=2,
                    pids=(0,),
                    name="<unknown>",
                )
                for link in (2, 5, 11)
            )
        ),
        {"kernel.xid": "RESET_GPU"},
        source=(
            f"{CAT}: Xid 74 NVLINK_ERROR, WORKFLOW_NVLINK_ERR: 'A GPU reset or node reboot is "
            "needed to clear this error'; several links of one GPU are one incident"
        ),
    ),
    "xid48-with-63": Fault(
        ("h100-sxm-8x", "h200-8x"),
        both(
            xid_lines(48, "An uncorrectable double bit error (DBE) has been detected.", gpu=6),
            xid_lines(63, "Row Remapper: New row marked for remapping, reset gpu.", gpu=6),
        ),
        {"kernel.xid": "DRAIN"},
        source=f"{CAT}: WORKFLOW_XID_48: with Xid 63 or 64, DRAIN_AND_RESET",
    ),
    "xid79-recurs-after-reboot": Fault(
        ("h100-sxm-8x", "h200-8x"),
        both(
            previous_boot_xid(79, gpu=3),
            xid_lines(79, "GPU has fallen off the bus.", gpu=3, pids=(0,), name="<unknown>"),
        ),
        {"kernel.xid": "ISOLATE_RMA"},
        source=(
            f"{CAT}: Xid 79 RESTART_BM, investigatory CONTACT_SUPPORT: the previous boot's "
            "receipt had it on the same GPU (UUID), the reboot did not clear it"
        ),
    ),
    "xid79-in-both-boots-of-the-log": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        both(
            log_line("-- Boot 0a0b0c0d11112222333344445555666 --", stamp=""),
            xid_lines(79, "GPU has fallen off the bus.", gpu=6, stamp="2026-11-19T22:10:00+0000"),
            log_line("-- Boot 9f1c1111222233334444555566667777 --", stamp=""),
            xid_lines(79, "GPU has fallen off the bus.", gpu=6, pids=(0,), name="<unknown>"),
        ),
        {"kernel.xid": "ISOLATE_RMA"},
        source=(
            f"{CAT}: Xid 79 RESTART_BM, investigatory CONTACT_SUPPORT: the log's previous boot "
            "had it on the same PCI device, the reboot did not clear it"
        ),
    ),
    "xid64-previous-boot-other-gpu": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        both(
            previous_boot_xid(64, gpu=1),
            xid_lines(64, "Row remapper error.", gpu=2, pids=(0,), name="<unknown>"),
        ),
        {"kernel.xid": "RESET_GPU"},
        source=(
            f"{CAT}: Xid 64 INFOROM_DRAM_RETIREMENT_FAILURE, RESET_GPU; the previous boot's "
            "fault was on another GPU: not a recurrence"
        ),
    ),
}
