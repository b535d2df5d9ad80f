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
