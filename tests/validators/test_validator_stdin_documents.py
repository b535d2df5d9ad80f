"""``imagectl validate --replay - --expect -``: what a controller sends a host in one
module run (playbooks/validate.yml) instead of copying a snapshot file first.

Standard input holds the snapshot, then the expectations: two JSON documents one after
the other. Each reading takes the next; anything after the last is refused, as is a
missing or broken document, each naming standard input and exiting 2 (bad input) with no
receipt on standard output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SNAPS = Path(__file__).resolve().parents[1] / "snapshots"
IMAGECTL = str(Path(sys.executable).parent / "imagectl")
ARGS = [IMAGECTL, "validate", "--profile", "boot", "--json", "--replay", "-", "--expect", "-"]


def _snapshot() -> str:
    return (SNAPS / "healthy" / "l4-1x.json").read_text()


def _expect(**changes: Any) -> str:
    return json.dumps({**json.loads((SNAPS / "expect" / "l4-1x.json").read_text()), **changes})


def _run(text: str, args: list[str] = ARGS) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(args, input=text, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    return proc.returncode, (json.loads(proc.stdout) if proc.stdout.strip() else {}), proc.stderr


def test_snapshot_then_expectations_on_stdin_is_the_same_verdict_as_files(tmp_path: Path):
    code, receipt, err = _run(_snapshot() + "\n" + _expect())
    assert code == 0, err
    assert receipt["verdict"] == "pass" and receipt["mode"] == "replay"
    assert receipt["expectations"]["gpu_count"] == 1 and receipt["snapshot"] == "standard input"
    # the expectations really are the second document: a wrong one fails the host
    code, receipt, err = _run(_snapshot() + _expect(gpu_count=8))  # no separator needed
    assert code == 1 and receipt["verdict"] == "fail", err
    # and the same documents as files give the same checks
    (tmp_path / "e.json").write_text(_expect())
    snap = str(SNAPS / "healthy" / "l4-1x.json")
    files = [IMAGECTL, "validate", "--profile", "boot", "--json", "--replay", snap,
             "--expect", str(tmp_path / "e.json")]  # fmt: skip
    _, by_file, _ = _run("", files)
    _, by_stdin, _ = _run(_snapshot() + _expect())
    assert [(c["id"], c["outcome"]) for c in by_stdin["checks"]] == [
        (c["id"], c["outcome"]) for c in by_file["checks"]
    ]


def test_the_order_is_snapshot_first() -> None:
    code, receipt, err = _run(_expect() + "\n" + _snapshot())
    assert code == 2 and receipt == {}
    assert "standard input" in err and "snapshot" in err


def test_a_missing_second_document_is_named() -> None:
    code, receipt, err = _run(_snapshot())
    assert code == 2 and receipt == {}
    assert "no expectations file on standard input" in err and "held 1 document" in err


def test_anything_after_the_last_document_is_refused() -> None:
    code, receipt, err = _run(_snapshot() + _expect() + "\n{}\n")
    assert code == 2 and receipt == {}
    assert "standard input holds more after its 2 document(s)" in err


def test_a_broken_second_document_names_its_line() -> None:
    code, receipt, err = _run(_snapshot() + '\n{\n  "shape": \n')
    assert code == 2 and receipt == {}
    assert "line 3: not valid JSON" in err and "standard input" in err


def test_one_document_for_expect_alone_still_refuses_extra_data() -> None:
    args = [IMAGECTL, "validate", "--profile", "boot", "--json", "--expect", "-",
            "--replay", str(SNAPS / "healthy" / "l4-1x.json")]  # fmt: skip
    code, _, err = _run(_expect() + " trailing", args)
    assert code == 2 and "holds more after its 1 document(s): 'trailing'" in err


def test_a_second_in_process_run_reads_its_own_standard_input(cli: Any, monkeypatch) -> None:
    """The documents read are tied to the stream they came from: the same process running
    the command again (the in-process CLI) does not see the first run's input."""
    import io

    args = ARGS[1:]
    for gpu_count, verdict in ((1, "pass"), (8, "fail")):
        text = _snapshot() + _expect(gpu_count=gpu_count)
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
        result = cli(*args)
        assert json.loads(result.out)["verdict"] == verdict, result.err
