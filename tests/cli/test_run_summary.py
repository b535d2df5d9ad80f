"""The local run's summary shows what a host wrote (its receipt's check messages) and
what the run reports as text, never as rich markup: "[/]" once crashed the view and
"[link=...]" rendered a live link."""

from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from imagectl.cli.run import _summary


def test_the_summary_prints_host_text_literally() -> None:
    hostile = "bad [/] [link=https://example.invalid]click[/link]"
    result = SimpleNamespace(
        image_id="sha256:" + "a" * 64, image_file="f.qcow2", build_id="b-1",
        candidate_reused=False, fault=None, verdict="fail", worst_action="BLOCK_IMAGE",
        failing_checks=[{"name": "sw.packages.held", "message": hostile}], receipt="r.json",
        regions_reached=[], regions=["local-a"], outcome="blocked",
        blocked_reason=f"validation failed: {hostile}", error=hostile, timings={},
    )  # fmt: skip
    console = Console(record=True, width=300)
    _summary(console, result)
    text = console.export_text()
    assert text.count(hostile) == 3  # the check, the block reason and the error
    assert "href" not in console.export_html()  # no live link
