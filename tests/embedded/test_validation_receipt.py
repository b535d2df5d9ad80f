"""The local run reads receipts written by the real validator (here: run on this host)."""

from __future__ import annotations

import json
from pathlib import Path

from imagectl.orchestrate.run import failing_checks
from imagectl.validators.receipt import load_receipt


def test_failing_checks_are_named_from_a_real_receipt(cli, tmp_path: Path):
    expect = tmp_path / "expect.json"
    expect.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "stack": "local",
                "stack_digest": "d" * 64,
                "cloud": "local",
                "gpus_expected": False,
                "packages": {"imagectl-no-such-package": "1.0-1"},
                "held": ["imagectl-no-such-package"],
            }
        )
    )
    out = tmp_path / "receipt.json"
    res = cli("validate", "--profile", "boot", "--expect", str(expect), "--image-id",
              "sha256:" + "a" * 64, "--no-hygiene", "-o", str(out))  # fmt: skip
    assert res.code == 1, res.err
    receipt = load_receipt(out)
    assert receipt.verdict == "fail"
    assert receipt.image_id == "sha256:" + "a" * 64
    failing = failing_checks(receipt)
    names = {f["name"] for f in failing}
    assert "sw.packages.pinned" in names
    pinned = next(f for f in failing if f["name"] == "sw.packages.pinned")
    assert "imagectl-no-such-package" in pinned["message"]
    assert all(f["title"] for f in failing)
