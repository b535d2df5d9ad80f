"""Node health as fleet metrics: base units in names, one info series,
failing checks only, the watcher's passive findings, and a series budget an operator of
10,000 nodes can afford.

Every file is produced by the real validator (``render``) and watcher (``observe``) over
replayed snapshots, and read back with prometheus_client's parser."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from imagectl.validators.prometheus import SERIES_BUDGET, count_series
from imagectl.validators.watch import REASONS
from tests.fleet.nodes import SNAPSHOTS, boot_file, node_snapshot, watch_file, with_xids

parse = pytest.importorskip("prometheus_client.parser").text_string_to_metric_families

EIGHT_GPU = sorted(
    p for p in (SNAPSHOTS / "healthy").glob("*.json")
    if len(json.loads(p.read_text())["nvml"]["devices"]) == 8
)  # fmt: skip
UNIT_SUFFIXES = ("_celsius", "_watts", "_seconds", "_bytes", "_total", "_ratio")


def _families(text: str) -> dict[str, list]:
    return {f.name: list(f.samples) for f in parse(text)}


def test_the_corpus_has_8_gpu_nodes() -> None:
    assert len(EIGHT_GPU) >= 5, EIGHT_GPU  # H100 SXM, A100, H200, p5, ND H100 v5, ...


@pytest.mark.parametrize("snapshot", EIGHT_GPU, ids=lambda p: p.stem)
def test_an_8_gpu_node_exports_at_most_the_budget(snapshot: Path) -> None:
    now = time.time()
    snap = node_snapshot(image_id="img-1", booted_at=now - 3600, path=snapshot)
    boot, watch = boot_file(snap), watch_file(snap, now)
    total = count_series(boot) + count_series(watch)
    assert total <= SERIES_BUDGET, (snapshot.name, total)
    # the same count through the exposition format's own parser
    parsed = sum(len(s) for s in _families(boot).values()) + sum(
        len(s) for s in _families(watch).values()
    )
    assert parsed == total
    if snapshot.stem == "h100-sxm-8x":
        assert total == 31 + 10  # as the module's docstring says


def test_names_carry_base_units_and_no_series_has_a_unit_label() -> None:
    now = time.time()
    snap = node_snapshot(image_id="img-1", booted_at=now - 3600, clock_events={1: 0x40})
    text = boot_file(snap) + watch_file(with_xids(snap, [now - 10]), now)
    for name, samples in _families(text).items():
        for s in samples:
            assert "unit" not in s.labels
            if name != "imagectl_node_info":
                assert not {"image_id", "stack", "shape"} & set(s.labels)
    names = set(re.findall(r"^(imagectl_\w+?)(?:\{| )", text, re.M))
    assert "imagectl_gpu_temperature_celsius" in names and "imagectl_gpu_power_limit_watts" in names
    assert not any(re.search(r"_(c|mib|w|errors)$", n) for n in names)  # no unit shorthand
    for counter in ("imagectl_xid_events_total", "imagectl_sxid_events_total"):
        assert f"# TYPE {counter} counter" in text


def test_a_healthy_node_has_no_failing_series_but_always_its_counts() -> None:
    now = time.time()
    snap = node_snapshot(image_id="img-1", booted_at=now - 3600)
    fams = _families(boot_file(snap) + watch_file(snap, now))
    assert "imagectl_check_failed" not in fams and "imagectl_gpu_problem" not in fams
    assert [s.value for s in fams["imagectl_validation_failed_checks"]] == [0]
    assert [s.value for s in fams["imagectl_xid_events"]] == [0]  # parser drops _total
    assert {s.labels["reason"]: s.value for s in fams["imagectl_gpu_problems"]} == dict.fromkeys(
        REASONS, 0
    )
    assert [s.value for s in fams["imagectl_watch_read_ok"]] == [1]


def test_the_watcher_sees_what_came_after_the_boot_check() -> None:
    """Xid 79 twice after boot, HW thermal slowdown (NVML bit 0x40) on GPU 3, power brake
    (0x80) on GPU 6 and a pending row remap on GPU 5: the boot check judged the node as it
    booted; the watcher reports each as it is now."""
    now = time.time()
    snap = node_snapshot(
        image_id="img-1", booted_at=now - 7200, clock_events={3: 0x41, 6: 0x80}, remap_pending=(5,)
    )
    fams = _families(watch_file(with_xids(snap, [now - 3000, now - 100]), now))
    assert [s.value for s in fams["imagectl_xid_events"]] == [2]
    assert [(s.labels["xid"], s.value) for s in fams["imagectl_xid_code_events"]] == [("79", 2)]
    assert {(s.labels["gpu"], s.labels["reason"]) for s in fams["imagectl_gpu_problem"]} == {
        ("3", "hw_thermal_slowdown"), ("6", "hw_power_brake"), ("5", "row_remap_pending"),
    }  # fmt: skip
    counts = {s.labels["reason"]: s.value for s in fams["imagectl_gpu_problems"]}
    assert counts["hw_thermal_slowdown"] == counts["hw_power_brake"] == 1
    assert counts["hw_slowdown"] == 0


def test_xids_of_an_earlier_boot_are_not_this_boots() -> None:
    now = time.time()
    snap = node_snapshot(image_id="img-1", booted_at=now - 600)
    fams = _families(watch_file(with_xids(snap, [now - 7200, now - 5000]), now))
    assert [s.value for s in fams["imagectl_xid_events"]] == [0]


def test_an_unreadable_log_is_unknown_not_healthy() -> None:
    now = time.time()
    snap = node_snapshot(image_id="img-1", booted_at=now - 600)
    snap["kernel_log"] = {**snap["kernel_log"], "error": "permission denied"}
    fams = _families(watch_file(snap, now))
    assert [s.value for s in fams["imagectl_watch_read_ok"]] == [0]


def test_watch_once_writes_the_textfile_atomically(tmp_path: Path, cli) -> None:
    out = tmp_path / "collector" / "imagectl-watch.prom"
    snapshot = SNAPSHOTS / "faults" / "h100-sxm-8x--xid79-fallen-off-bus.json"
    r = cli("watch", "--once", "--replay", str(snapshot), "--prometheus", str(out))
    assert r.code == 0, r.output
    assert sorted(p.name for p in out.parent.iterdir()) == ["imagectl-watch.prom"]
    assert out.stat().st_mode & 0o777 == 0o644
    assert 'imagectl_xid_code_events_total{xid="79"} 1' in out.read_text()


def test_the_command_line_defaults_are_the_watchers() -> None:
    from imagectl.cli import watch as cli_watch
    from imagectl.validators import watch

    assert (cli_watch.DEFAULT_FILE, cli_watch.DEFAULT_INTERVAL_S) == (
        watch.DEFAULT_FILE, watch.DEFAULT_INTERVAL_S,
    )  # fmt: skip


def test_the_info_series_names_the_image_and_where_it_runs() -> None:
    """Region comes from the instance metadata the validator reads (AWS IMDS
    ``placement/region``; recorded in the snapshot's ``cloud_image`` fact)."""
    now = time.time()
    snap = node_snapshot(image_id="ami-0canary", booted_at=now - 60, region="eu-west-1")
    (info,) = _families(boot_file(snap, stack="h100-training"))["imagectl_node_info"]
    assert {k: info.labels[k] for k in ("image_id", "stack", "shape", "cloud", "region")} == {
        "image_id": "ami-0canary", "stack": "h100-training", "shape": "p5.48xlarge",
        "cloud": "aws", "region": "eu-west-1",
    }  # fmt: skip
