"""``imagectl snapshot -o FILE``: capture what the validator's checks read on this host."""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write_json
from imagectl.core.numbers import Bounded
from imagectl.core.output import console, crash_traces, json_option, show
from imagectl.validators.commands.options import history_option, hygiene_root_option, output_option


@click.command("snapshot")
@output_option("Where to write the snapshot (JSON).", required=True)
@click.option("--description", default="", help="A line saying what this host is / why.")
@hygiene_root_option()
@click.option(
    "--dcgm-level",
    type=click.IntRange(1, 4),
    default=None,
    help="Also run `dcgmi diag -r N -j` (NVIDIA DCGM, hard timeout per level) and record it "
    "for replay (quick replays level 2, full 3, burn 4).",
)
@click.option(
    "--load-s",
    type=Bounded(1, 86400, unit="seconds"),
    default=None,
    help="Also run bf16 GEMMs on every GPU for this many seconds while NVML is sampled, and "
    "record the samples (clocks, clock-event reasons, temperature, power, PCIe link, ECC and "
    "replay counters) so a quick/full/burn replay judges every load.* check.",
)
@history_option(
    "Previous boots' receipts to record (default: the boot unit's "
    "/var/lib/imagectl/boots when present), so a replay judges XID recurrences."
)
@click.option(
    "--fabric-interval-s",
    type=Bounded(0, 600, unit="seconds"),
    default=2.0,
    show_default=True,
    help="Read the InfiniBand/EFA port error counters twice this far apart (a counter "
    "rising on an idle link fails fabric.ib.counters in replay).",
)
@click.option(
    "--no-nccl-probe",
    is_flag=True,
    help="Skip the tiny NCCL run (NCCL_DEBUG=INFO, topology dump) that records which net "
    "plugin NCCL loads and the topology it detects.",
)
@json_option
def command(
    output: Path,
    description: str,
    hygiene_root: str,
    dcgm_level: int | None,
    load_s: float | None,
    history_dir: Path | None,
    fabric_interval_s: float,
    no_nccl_probe: bool,
    as_json: bool,
) -> int:
    """Capture every NVML value per GPU, this boot's kernel log and the software facts.

    Replay it with `imagectl validate --replay FILE`. Format:
    imagectl/validators/schema/snapshot.schema.json.
    """
    from imagectl.validators.snapshot import capture

    crash_traces()
    if history_dir is not None and not history_dir.is_dir():
        raise UserError(f"--history {history_dir}: no such folder", hint="Give the boots/ folder")
    default = Path("/var/lib/imagectl/boots")
    history = history_dir or (default if default.is_dir() else None)
    if load_s:
        _gpus_to_load()
    snap = capture(
        root=hygiene_root,
        description=description,
        dcgm_level=dcgm_level,
        history_dir=history,
        load_s=load_s,
        fabric_interval_s=fabric_interval_s,
        nccl_probe=not no_nccl_probe,
    )
    atomic_write_json(output, snap, indent=1, sort_keys=True)
    n = len(snap["nvml"]["devices"])
    err = snap["nvml"]["init"]["error"]
    dcgm = snap.get("dcgm") or {}
    dcgm_note = ""
    if dcgm:
        dcgm_note = f", DCGM r{dcgm['level']}: " + (
            dcgm["error"] or ("timed out" if dcgm["timed_out"] else f"exit {dcgm['exit_code']}")
        )
    summary = {
        "snapshot": str(output),
        "gpus": n,
        "nvml_error": err,
        "dcgm": {k: dcgm.get(k) for k in ("level", "exit_code", "timed_out", "error")}
        if dcgm
        else None,
        "description": snap.get("description"),
    }
    line = f"snapshot: {output} ({n} GPU(s){', NVML: ' + err if err else ''}{dcgm_note})"
    show(as_json, summary, lambda: console().print(line))
    return 0


def _gpus_to_load() -> None:
    """``--load-s`` needs GPUs that NVML can read (it samples them under load): refused
    before anything is captured where there are none (it ended in NVML's traceback)."""
    from imagectl.validators.nvml import LiveNvml

    nvml = LiveNvml()
    try:
        nvml.nvmlInit()
        try:
            count = int(nvml.nvmlDeviceGetCount())
        finally:
            nvml.nvmlShutdown()
    except Exception as exc:  # NVMLError and its kin: no driver, no library
        why = f"NVML cannot be read here ({type(exc).__name__}: {exc})"
    else:
        if count > 0:
            return
        why = "NVML sees no GPU here"
    raise UserError(
        f"--load-s runs GEMMs on this host's GPUs while NVML samples them, and {why}: "
        "nothing was captured",
        hint="Drop --load-s (the snapshot then records no samples under load), or run it on "
        "a GPU host with the NVIDIA driver loaded",
    )
