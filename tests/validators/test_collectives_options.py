"""``imagectl collectives``'s options, each shown to change the run: one node of two
gloo ranks on this machine (a hostfile of one line), the command as the fabric playbook
runs it on each node (``playbooks/fabric.yml``), in a process of its own.

- ``--op`` runs only the collectives named; ``--max-bytes`` ends the size sweep there;
  ``--profile`` is the sweep (burn: a factor of 2 from 1 KiB, quick: 4;
  validators/collectives/profiles.py).
- ``--address`` is this node's line in the hostfile (one it does not hold: exit 2).
- ``--device cuda`` with a CPU build of torch is one error naming it, not each rank's
  AttributeError from ``torch.cuda.set_device``.
- ``--json`` is accepted and the output is the same JSON document (it always prints JSON).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from imagectl.validators.collectives.launch import free_port

IMAGECTL = str(Path(sys.executable).with_name("imagectl"))


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    if os.environ.get("CI") != "true":
        pytest.importorskip("torch")
    path = tmp_path / "hosts"
    path.write_text(f"127.0.0.1 slots=2 port={free_port()}\n")
    return path


def _run(*argv: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([IMAGECTL, *argv], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        pytest.fail(f"not JSON (exit {proc.returncode}): {proc.stdout[-500:]}{proc.stderr[-500:]}")
    return proc.returncode, doc, " ".join(proc.stderr.split())


def _sizes(doc: dict[str, Any]) -> dict[str, list[int]]:
    return {
        c["id"]: [s["bytes"] for s in c["details"]["sizes"]]
        for c in doc["checks"]
        if c["id"] not in ("collective.rendezvous", "collective.nccl_version")
    }


def test_op_max_bytes_profile_and_json_shape_the_run(hosts: Path) -> None:
    code, quick, _ = _run("collectives", "--nodes", str(hosts), "--device", "cpu",
                          "--op", "all_reduce", "--max-bytes", "4096", "--json")  # fmt: skip
    assert code == 0, quick
    assert _sizes(quick) == {"collective.all_reduce": [1024, 4096]}
    code, burn, _ = _run("collectives", "--nodes", str(hosts), "--device", "cpu",
                         "--op", "broadcast", "--max-bytes", "8192", "--profile", "burn",
                         "--address", "127.0.0.1")  # fmt: skip
    assert code == 0, burn
    assert _sizes(burn) == {"collective.broadcast": [1024, 2048, 4096, 8192]}
    assert quick["kind"] == burn["kind"] and quick["address"] == burn["address"] == "127.0.0.1"


def test_address_not_in_the_hostfile_is_bad_input(hosts: Path) -> None:
    code, doc, err = _run("collectives", "--nodes", str(hosts), "--device", "cpu",
                          "--address", "10.255.0.1")  # fmt: skip
    assert code == 2 and doc == {}
    assert "--address 10.255.0.1 is not in the hostfile (127.0.0.1)" in err


def test_device_cuda_with_a_cpu_torch_is_one_error_naming_it(hosts: Path) -> None:
    import torch

    if torch.version.cuda is not None:
        pytest.skip("this torch is a CUDA build")  # the test venv's is the CPU build
    code, doc, _ = _run("collectives", "--nodes", str(hosts), "--device", "cuda",
                        "--op", "all_reduce")  # fmt: skip
    assert code == 1
    (check,) = doc["checks"]
    assert (check["id"], check["outcome"]) == ("collective.rendezvous", "error")
    assert "is a CPU build" in check["message"] and "--device cpu" in check["message"]
    assert doc["device"] == "cuda"


def test_expect_and_shape_are_read_before_any_rank_starts(hosts: Path, tmp_path: Path) -> None:
    """``--expect FILE`` and ``--shape NAME`` are the expectations the run is judged by:
    read before any rank starts, so a corrupt file or an unknown shape is exit 2 naming
    it, with no rank launched (no JSON document)."""
    corrupt = tmp_path / "expect.json"
    corrupt.write_text('{"gpu":\n')
    code, doc, err = _run("collectives", "--nodes", str(hosts), "--device", "cpu",
                          "--expect", str(corrupt))  # fmt: skip
    assert code == 2 and doc == {} and f"{corrupt}: line 2: not valid JSON" in err
    code, doc, err = _run("collectives", "--nodes", str(hosts), "--device", "cpu",
                          "--shape", "p9.96xlarge")  # fmt: skip
    assert code == 2 and doc == {} and "unknown shape 'p9.96xlarge'" in err
    assert "p5.48xlarge" in err  # the known shapes, named
