"""Is this host ready for a loaded profile's GPU work? The validator's toolkit and CUDA.

``gather(tries)`` reads the live host: the toolkit (torch's version and CUDA variant, read
from its files without importing it), the driver's libcuda, the /dev/nvidia* device nodes,
whether nvidia_uvm is loaded, and cuInit in ``tries`` fresh processes (``cuda_init.probe``).
``imagectl snapshot`` records the same dict as the snapshot's ``cuda`` section, so a replay
judges the recorded facts with this same code.

Judgement, on a host whose expectations name GPUs (``--device auto`` means CUDA there):

- ``validator.toolkit``: torch missing, or built without CUDA, is an ``error`` with
  BLOCK_IMAGE (a dependency the profile needs is missing: never a skip); a torch or CUDA
  variant other than the stack's pin fails with BLOCK_IMAGE;
- ``cuda.init``: cuInit never succeeding fails with BLOCK_IMAGE, naming the CUresult and
  the host fact behind it (``data/cuda_init.yaml``: libcuda missing, no device nodes,
  nvidia_uvm not loaded, driver/library mismatch, ...).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
from functools import lru_cache
from importlib import metadata
from typing import Any

from imagectl.validators.catalogs import _load
from imagectl.validators.compute.cuda_init import init_check, probe
from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

TOOLKIT_ID = "validator.toolkit"
TOOLKIT_HOST = "host"  # validate --toolkit host: the host's own torch, recorded as such
declare(
    TOOLKIT_ID,
    "The validator's GPU toolkit (torch and its CUDA variant) is installed as pinned",
    runs=Runs.SUBPROCESS, action=Action.BLOCK_IMAGE,
)  # fmt: skip
_CUDA_LINE = re.compile(r"^cuda\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", re.M)


def torch_cuda_of(version_py: str) -> str | None:
    """The CUDA version torch was built for, from its ``torch/version.py`` (None: cpu)."""
    m = _CUDA_LINE.search(version_py)
    return (m.group(1) or m.group(2) or None) if m else None


def toolkit_facts() -> dict[str, object]:
    """torch's version and CUDA variant from its installed files (no import: fast, safe)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError) as exc:
        return {"installed": False, "error": f"{type(exc).__name__}: {exc}"}
    if spec is None or not spec.submodule_search_locations:
        return {"installed": False, "error": "No module named 'torch'"}
    folder = next(iter(spec.submodule_search_locations))
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        version = None
    cuda = None
    try:
        with open(os.path.join(folder, "version.py"), encoding="utf-8") as fh:
            cuda = torch_cuda_of(fh.read())
    except OSError as exc:
        return {"installed": False, "error": f"torch is broken: {exc}", "path": folder}
    return {"installed": True, "version": version, "cuda": cuda, "path": folder}


def _uvm_loaded() -> bool | None:
    try:
        with open("/proc/modules", encoding="utf-8") as fh:
            return any(line.split(" ", 1)[0] == "nvidia_uvm" for line in fh)
    except OSError:
        return None


def gather(tries: int) -> dict[str, object]:
    """The live host's readiness facts (the snapshot's ``cuda`` section)."""
    return {
        "toolkit": toolkit_facts(),
        "device_nodes": sorted(glob.glob("/dev/nvidia[0-9]*")),
        "nvidiactl": os.path.exists("/dev/nvidiactl"),
        "uvm": {"loaded": _uvm_loaded(), "node": os.path.exists("/dev/nvidia-uvm")},
        "cuinit": probe(tries) if tries else [],
    }


@lru_cache(maxsize=1)
def _catalog() -> dict[str, Any]:
    doc: dict[str, object] = _load("cuda_init.yaml")
    return doc


def _host_cause(facts: dict[str, Any]) -> tuple[str, str] | None:
    tries = facts.get("cuinit") or []
    errors = " ".join(str(t.get("error") or "") for t in tries)
    uvm = facts.get("uvm") or {}
    holds = {
        "libcuda_missing": bool(tries)
        and all(t.get("rc") is None for t in tries)
        and "libcuda" in errors,
        "no_device_nodes": not facts.get("device_nodes"),
        "uvm_missing": uvm.get("loaded") is False or uvm.get("node") is False,
    }
    for cause in _catalog()["host_causes"]:
        if holds.get(cause["fact"]):
            return cause["meaning"], cause["source"]
    return None


def diagnose(facts: dict[str, Any]) -> str:
    """Why cuInit failed: the CUresult's meaning and the host fact that explains it."""
    parts = []
    codes = sorted({t["rc"] for t in facts.get("cuinit") or [] if isinstance(t.get("rc"), int)})
    results = _catalog()["results"]
    for rc in codes:
        entry = results.get(rc)
        parts.append(
            f"cuInit returned {rc} ({entry['name']}: {entry['meaning']})"
            if entry
            else f"cuInit returned {rc}"
        )
    cause = _host_cause(facts)
    if cause:
        parts.append(cause[0])
    if not parts:
        first: dict[str, Any] = next(iter(facts.get("cuinit") or []), {})
        parts.append(str(first.get("error") or "no cuInit result"))
    return "; ".join(parts)


def init_result(facts: dict[str, Any], expected_devices: int) -> CheckResult:
    """``cuda.init`` from the facts: never initialising blocks the image, with the reason."""
    tries = facts.get("cuinit") or []
    if not tries:
        return check_result(
            id="cuda.init",
            severity=Severity.CRITICAL,
            outcome=Outcome.ERROR,
            action=Action.BLOCK_IMAGE,
            message="cuInit was not tried (no record of it)",
        )
    result = init_check(tries, expected_devices)
    if result.outcome is Outcome.FAIL and result.measured is None:
        why = diagnose(facts)
        details = dict(result.details, diagnosis=why, host=_host_facts(facts))
        return result.model_copy(
            update={
                "action": Action.BLOCK_IMAGE,
                "message": f"CUDA never initialised in {len(tries)} tries: {why}",
                "details": details,
                "source": f"{_catalog()['source']}; validators/data/cuda_init.yaml",
            }
        )
    return result


def _host_facts(facts: dict[str, object]) -> dict[str, object]:
    return {k: facts.get(k) for k in ("device_nodes", "nvidiactl", "uvm")}


def toolkit_differences(tk: dict[str, object], pinned: dict[str, str], device: str) -> list[str]:
    """How the recorded toolkit differs from the pin: torch's release, and on CUDA its
    variant (empty: it is the pinned one)."""
    base = str(tk.get("version") or "").split("+")[0]
    wrong = []
    if base != pinned.get("torch"):
        wrong.append(f"torch {tk.get('version')} (pinned {pinned.get('torch')})")
    if device == "cuda" and tk.get("cuda") != pinned.get("cuda"):
        wrong.append(f"CUDA variant {tk.get('cuda')} (pinned {pinned.get('cuda')})")
    return wrong


def toolkit_matches(tk: dict[str, object], pinned: dict[str, str], device: str) -> bool:
    return not toolkit_differences(tk, pinned, device)


def toolkit_result(
    facts: dict[str, Any], pinned: dict[str, str] | None, device: str, *, host: bool = False
) -> CheckResult:
    """``validator.toolkit``: the toolkit the profile needs is present, as pinned.

    ``host`` (``validate --toolkit host``): the host's own torch runs the GPU work. It must
    still be there and, on CUDA, a CUDA build; the pin is not applied here but recorded
    beside what ran, and the image gate refuses the receipt where the stack pins another
    toolkit (``imagectl.promotion.gate``)."""
    tk = facts.get("toolkit") or {}
    common: dict[str, object] = {
        "id": TOOLKIT_ID,
        "expected": pinned,
        "measured": {"torch": tk.get("version"), "cuda": tk.get("cuda")},
        "source": "the stack's validation.toolkit (images/compat/toolkits.yaml)",
        "details": {"path": tk.get("path")},
    }
    if not tk.get("installed"):
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.ERROR,
            action=Action.BLOCK_IMAGE,
            message=f"the profile needs torch for its CUDA and collective tests, and it is "
            f"missing ({tk.get('error') or 'not installed'}); imagectl validate-image ships the "
            "stack's validation.toolkit to the host (validate --toolkit-wheelhouse FILE), or "
            "the image carries it (validation.toolkit.install: bake)",
        )
    if device == "cuda" and not tk.get("cuda"):
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.ERROR,
            action=Action.BLOCK_IMAGE,
            message=f"torch {tk.get('version')} is a CPU-only build: it cannot run CUDA",
        )
    if host:
        differs = pinned is not None and not toolkit_matches(tk, pinned, device)
        return check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            message=f"the host's own toolkit (--toolkit host): torch {tk.get('version')} with "
            f"CUDA {tk.get('cuda') or 'none (cpu)'}"
            + (
                f"; not the stack's pin (torch {pinned['torch']}, CUDA {pinned['cuda']}), so "
                "this receipt stands for this host, not for the image"
                if differs and pinned
                else ""
            ),
        )
    if pinned:
        wrong = toolkit_differences(tk, pinned, device)
        if wrong:
            return check_result(
                **common,
                severity=Severity.CRITICAL,
                outcome=Outcome.FAIL,
                action=Action.BLOCK_IMAGE,
                message="the validator toolkit differs from the pin: " + "; ".join(wrong),
            )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"torch {tk.get('version')} with CUDA {tk.get('cuda') or 'none (cpu)'}",
    )
