"""``imagectl watch`` on the command line: ``--json``, an explained ``--once`` where NVML
cannot be read (it exited 1 printing nothing), and no folder made where none was asked
for (its default file's folder is the node exporter's: on a machine without
node_exporter, ``/var/lib/node_exporter/textfile_collector/`` was created)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagectl.cli.watch import DEFAULT_FILE

REPO = Path(__file__).resolve().parents[2]
HEALTHY = REPO / "tests" / "snapshots" / "healthy" / "h200-8x.json"


def flat(text: str) -> str:
    return " ".join(text.split())


def test_watch_once_json(cli, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "w.prom"  # a --prometheus given: its folder is made
    r = cli("watch", "--once", "--replay", str(HEALTHY), "--prometheus", str(out), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["read_ok"] is True and doc["gpus"] == 8 and doc["errors"] == []
    assert doc["prometheus"] == str(out) and "imagectl_watch_read_ok 1" in out.read_text()
    assert doc["xid_events"] == 0 and doc["problems"] == []


def test_watch_once_without_nvml_says_why(cli, tmp_path: Path) -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver loaded")
    out = tmp_path / "w.prom"
    r = cli("watch", "--once", "--prometheus", str(out))
    assert r.code == 1
    said = flat(r.err)
    assert "watch: could not read nvml.init" in said and "libnvidia-ml.so.1" in said
    assert "imagectl_watch_read_ok 0" in said and str(out) in said
    assert "imagectl_watch_read_ok 0" in out.read_text()


def test_the_default_file_needs_node_exporters_folder(cli) -> None:
    folder = Path(DEFAULT_FILE).parent
    if folder.exists():
        pytest.skip(f"{folder} exists here (node_exporter's textfile collector)")
    r = cli("watch", "--once", "--replay", str(HEALTHY))
    assert r.code == 2
    assert f"textfile collector folder {folder} does not exist" in flat(r.err)
    assert "--prometheus FILE" in flat(r.err)
    assert not folder.exists() and not folder.parent.exists()
