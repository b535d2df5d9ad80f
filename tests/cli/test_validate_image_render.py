"""validate-image's view and its progress lines print what hosts wrote (receipt check ids,
problems, decision reasons) literally: "[/]" crashed rich, "[link=...]" rendered a live
link, and an escape sequence reached the terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from imagectl.cli import validate_image
from imagectl.validation.progress import RichReporter

HOSTILE = "bad [/] [link=https://example.invalid]click[/link]"
ESC = "\x1b]52;c;cm0gLXJmIC8K\x07"  # OSC 52: write the clipboard


def _payload() -> dict:
    return {
        "image_id": "ami-1", "shape": "p5.48xlarge", "state": "blocked",
        "reasons": [f"sw.packages.held: {HOSTILE}{ESC}"], "terminated": ["i-1"],
        "hosts": [{"host": "i-1", "verdict": "fail", "worst_action": "BLOCK_IMAGE",
                   "failed_checks": [f"x.{HOSTILE}"], "problem": HOSTILE + ESC}],
        "bad_hosts": [{"host": "i-[red]2", "failed_checks": [HOSTILE]}],
        "receipts": "live",
    }  # fmt: skip


def test_the_view_prints_host_text_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Console(record=True, width=400, file=io.StringIO())
    monkeypatch.setattr(validate_image, "console", lambda stderr=False: record)
    validate_image._render(_payload())
    text = record.export_text()
    assert text.count(HOSTILE) >= 4, text  # reasons, the problem, a bad host's check...
    assert "i-[red]2" in text
    assert "href" not in record.export_html() and "\x1b]52" not in text


def test_progress_lines_print_host_text_literally() -> None:
    record = Console(record=True, width=400, file=io.StringIO())
    reporter = RichReporter(record)
    reporter.step(f"decision: blocked: {HOSTILE}{ESC}")
    text = record.export_text()
    assert HOSTILE in text and "\x1b]52" not in text
    assert "href" not in record.export_html()


def test_promote_rollback_and_reap_views_print_cloud_text_literally() -> None:
    """A region's error is the cloud's message; retention lines and resume commands carry
    names an operator or a cloud chose."""
    from types import SimpleNamespace

    from imagectl.cli.promote import render

    region = SimpleNamespace(region="r-[b]1", state="failed", resumed=False, replica_id=None,
                             seconds=1.0, error=HOSTILE + ESC)  # fmt: skip
    result = SimpleNamespace(
        state="partially_promoted", image_id="ami-[i]1", stack="s", cloud="aws",
        promotion_id=7, regions={"r-[b]1": region}, forced=True, overridden=[HOSTILE],
        deprecated=[HOSTILE], retention_skipped=[], seconds=2.0,
        resume_command=f"imagectl promote {HOSTILE}",
    )  # fmt: skip
    record = Console(record=True, width=400, file=io.StringIO())
    render(record, result)
    text = record.export_text()
    assert text.count(HOSTILE) >= 4 and "r-[b]1" in text and "ami-[i]1" in text, text
    assert "href" not in record.export_html() and "\x1b]52" not in text
