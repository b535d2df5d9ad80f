"""One pipeline: ``imagectl run`` is the build, validate-image and promote stages, so the
local cloud's stages run on their own and record exactly what the run records.

Needs the candidate of test_e2e's promoted run (the same module-scoped state folder):
``imagectl build --cloud local --reuse`` imports that very disk (content-addressed: the
same image id) into a second state folder, whose catalog starts empty, and
``imagectl validate-image --cloud local`` launches it (a QEMU VM), validates it over SSH
and decides. Its catalog rows and events for the image must be the run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from needs import require
from states import second_state

from tests.support import default_signals

REPO = Path(__file__).resolve().parents[2]
IMAGECTL = str(Path(sys.executable).parent / "imagectl")
pytestmark = pytest.mark.e2e


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env.update(IMAGECTL_STATE_DIR=str(state), COLUMNS="160")
    return env


def _imagectl(state: Path, *args: str, timeout: float = 1200) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [IMAGECTL, "--root", str(REPO), *args, "--json"],
        capture_output=True, text=True, env=_env(state), timeout=timeout, check=False,
    )  # fmt: skip
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON from imagectl {args[0]} (exit {proc.returncode}):\n"
                    f"{proc.stderr[-3000:]}")  # fmt: skip
    return proc.returncode, data, proc.stderr


def _history(state: Path, image_id: str) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """The candidate's row in its build region, its receipts, and its events up to the
    attestation (the run goes on to promote; validate-image stops there)."""
    code = (
        "import json, sys\n"
        "from imagectl.catalog.db import open_catalog\n"
        "from imagectl.catalog import repository as repo\n"
        "c = open_catalog()\n"
        "with c.transaction() as s:\n"
        "    row = repo.find_image(s, 'local', 'local-a', sys.argv[1])\n"
        "    runs = repo.receipts(s, row)\n"
        "    events = [(e.kind, e.details) for e in reversed(repo.events(s, image=row))]\n"
        "    print(json.dumps({'row': {'stack': row.stack, 'digest': row.stack_digest,\n"
        "        'build': row.build.build_id if row.build else None},\n"
        "        'receipts': [(r.shape, r.verdict, sorted((c['id'], c['outcome'])\n"
        "                      for c in r.receipt['checks'])) for r in runs],\n"
        "        'events': events}, default=str))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, image_id], capture_output=True, text=True,
        env=_env(state), timeout=120, check=True,
    )  # fmt: skip
    data = json.loads(proc.stdout)
    events = []
    for kind, details in data["events"]:
        d = details or {}
        events.append((kind, d.get("from"), d.get("to"), d.get("verdict"), d.get("shape")))
        if kind == "image.attested":
            break
    return {"row": data["row"], "receipts": data["receipts"]}, events


# the groups of the two e2e workers (conftest.py), balanced by their measured lengths
@pytest.mark.xdist_group("clouds")
def test_validate_image_on_the_local_cloud_records_what_the_run_recorded(
    promoted_run: tuple[int, dict[str, Any], str], e2e_state: Path, tmp_path: Path
) -> None:
    code, first, _ = promoted_run
    require(code == 0, "the promoted run failed; its candidate is needed here")
    other = second_state(e2e_state, tmp_path, first["image_id"])

    code, built, err = _imagectl(other, "build", "--stack", "local", "--cloud", "local",
                                 "--reuse")  # fmt: skip
    assert code == 0, err[-3000:]
    assert built["reused"] is True and built["build_id"] == first["build_id"]
    (image,) = built["images"]
    assert image == {"image_id": first["image_id"], "region": "local-a", "state": "built"}

    code, validated, err = _imagectl(other, "validate-image", first["image_id"],
                                     "--cloud", "local")  # fmt: skip
    assert code == 0, err[-3000:]
    assert validated["state"] == "validated" and validated["attestation"]
    assert validated["terminated"] == [i["instance_id"] for i in validated["launched"]]
    assert list((other / "registry" / "instances").glob("*")) == []

    run_rows, run_events = _history(e2e_state, first["image_id"])
    stage_rows, stage_events = _history(other, first["image_id"])
    assert stage_rows == run_rows
    assert stage_events == run_events
    assert [e[0] for e in stage_events] == [
        "image.recorded", "image.state", "validation.receipt", "image.state", "image.attested"
    ]  # fmt: skip


@pytest.mark.xdist_group("clouds")
def test_ctrl_c_during_validation_terminates_the_local_instance(
    promoted_run: tuple[int, dict[str, Any], str], e2e_state: Path, tmp_path: Path
) -> None:
    """SIGINT to validate-image while its instance (a QEMU VM in its own session, like a
    cloud instance) boots: the run's ``finally`` terminates it, the record goes, the
    image is left inconclusive."""
    code, first, _ = promoted_run
    require(code == 0, "the promoted run failed; its candidate is needed here")
    other = second_state(e2e_state, tmp_path, first["image_id"])
    code, built, err = _imagectl(other, "build", "--stack", "local", "--cloud", "local",
                                 "--reuse")  # fmt: skip
    assert code == 0, err[-3000:]
    image_id = built["images"][0]["image_id"]
    proc = subprocess.Popen(
        [IMAGECTL, "--root", str(REPO), "validate-image", image_id, "--cloud", "local",
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(other),
        start_new_session=True,
        preexec_fn=default_signals,
    )  # fmt: skip
    instances = other / "registry" / "instances"
    try:
        deadline = time.monotonic() + 300
        records: list[Path] = []
        while time.monotonic() < deadline and not records:
            records = [p for p in instances.glob("*.json") if "pid" in p.read_text()]
            time.sleep(0.2)
        assert records, "no instance was launched"
        pid = json.loads(records[0].read_text())["pid"]
        assert Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"qemu-system")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists(), "the instance's VM survived Ctrl-C"
    assert list(instances.glob("*")) == []
    _, events = _history(other, image_id)
    assert events[-1][:3] == ("image.state", "validating", "inconclusive")
