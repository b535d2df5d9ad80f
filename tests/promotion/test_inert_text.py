"""What an operator or a host wrote is shown literally: rich markup in a block reason or
a receipt's message (``[/]`` crashed the view, ``[link=...]`` rendered a live link) and
terminal control sequences (an OSC 52 clipboard write, BEL, erase-line) are inert in
``block``, ``status`` and ``receipt show`` (``imagectl.core.safetext``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO

MARKUP = "[/] [link=https://evil.example/x]click[/link] [bold red]x"
# ESC, a CSI erase-line and cursor-up, an OSC 52 clipboard write, the 8-bit CSI and bidi
# overrides: rich alone strips a few C0 bytes (BEL, CR) but prints ESC and the sequences'
# bodies, and no bidi control; so the test looks for what is left of each sequence too
CONTROL = "\x1b]52;c;ZXZpbA==\x07\x07\x1b[2K\x1b[1A\r\x9b31m\u202eevil\u2066x\u2069"
CONTROL_BYTES = (
    "\x1b",
    "\x07",
    "\x9b",
    "\r",
    "\u202e",
    "\u2066",
    "\u2069",
    "52;c;",
    "[2K",
    "[1A",
    "31m",
)


@pytest.fixture
def env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


def test_block_then_status_with_markup_in_the_reason(env, cli) -> None:
    img = env.validated(attest=False)
    r = cli("block", img.cloud_image_id, "--reason", f"{MARKUP} {CONTROL}done")
    assert r.code == 0, r.err
    assert MARKUP in r.out and "done" in r.out  # shown literally, never parsed
    for _ in range(2):  # the reason is in the catalog now: every later run reads it
        r = cli("status", "--stack", "local", "--events", "20")
        assert r.code == 0, r.err
        assert "[/]" in r.out and "[link=https://evil.example/x]" in r.out
        assert not any(c in r.out for c in CONTROL_BYTES), repr(r.out)
    r = cli("status", "--stack", "local", "--json")  # JSON keeps the reason as recorded
    (entry,) = r.json()["stacks"]
    assert entry["blocked"][0]["reason"].startswith(MARKUP)


def test_receipt_show_and_diff_print_host_messages_literally(cli, tmp_path: Path) -> None:
    path = tmp_path / "receipt.json"
    snapshot = REPO / "tests" / "snapshots" / "healthy" / "h100-sxm-8x.json"
    r = cli(
        "validate", "--replay", str(snapshot), "--profile", "boot", "--no-hygiene",
        "--stack", "h100-training", "--shape", "p5.48xlarge", "-o", str(path),
    )  # fmt: skip
    assert path.is_file(), r.err
    doc = json.loads(path.read_text())
    for check in doc["checks"]:
        check["message"] = f"{MARKUP} {CONTROL}{check['message']}"
    path.write_text(json.dumps(doc))

    r = cli("receipt", "show", str(path), "--all")
    assert r.code in (0, 1), r.err
    assert r.out.count("[link=https://evil.example/x]") >= 1 and "[/]" in r.out
    assert not any(c in r.out for c in CONTROL_BYTES), repr(r.out[:2000])

    other = tmp_path / "other.json"
    doc["checks"][0]["outcome"] = "warn" if doc["checks"][0]["outcome"] != "warn" else "pass"
    other.write_text(json.dumps(doc))
    r = cli("receipt", "diff", str(path), str(other))
    assert r.code in (0, 1) and "Traceback" not in r.err, r.err
