"""``imagectl snapshot -o FILE``: capture what the validator's checks read on this host."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("snapshot")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the snapshot (JSON).",
)
@click.option("--description", default="", help="A line saying what this host is / why.")
@click.option("--hygiene-root", default="/", show_default=True, type=click.Path(file_okay=False))
@click.option(
    "--dcgm-level",
    type=click.IntRange(1, 4),
    default=None,
    help="Also run `dcgmi diag -r N -j` (NVIDIA DCGM, hard timeout per level) and record it "
    "for replay (quick replays level 2, full 3, burn 4).",
)
def command(output: Path, description: str, hygiene_root: str, dcgm_level: int | None) -> int:
    """Capture every NVML value per GPU, this boot's kernel log and the software facts.

    Replay it with `imagectl validate --replay FILE`. Format:
    imagectl/validators/schema/snapshot.schema.json.
    """
    from imagectl.cli.common import console
    from imagectl.fsutil import atomic_write_json
    from imagectl.validators.snapshot import capture

    snap = capture(root=hygiene_root, description=description, dcgm_level=dcgm_level)
    atomic_write_json(output, snap, indent=1, sort_keys=True)
    n = len(snap["nvml"]["devices"])
    err = snap["nvml"]["init"]["error"]
    dcgm = snap.get("dcgm") or {}
    dcgm_note = ""
    if dcgm:
        dcgm_note = f", DCGM r{dcgm['level']}: " + (
            dcgm["error"] or ("timed out" if dcgm["timed_out"] else f"exit {dcgm['exit_code']}")
        )
    console().print(f"snapshot: {output} ({n} GPU(s){', NVML: ' + err if err else ''}{dcgm_note})")
    return 0
