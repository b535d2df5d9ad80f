"""NOT_SUPPORTED from one GPU: a skip only when its architecture lacks the call.

Two ways to know the call is there: the NVML API reference says every GPU of that
architecture or newer answers it (``min_arch`` in ``data/nvml.yaml``), or a peer of the
same SKU on this host answers the very same call. Either way the GPU that did not answer
fails. FUNCTION_NOT_FOUND (the driver lacks the symbol) stays a skip: every GPU shares
the driver.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml

from imagectl.validators.findings import Finding, bad
from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.nvml.errors import error_label, error_name
from imagectl.validators.nvml.policy import nvml_policy


def _fresh(arg: object) -> object:
    """A new buffer of the same type for structures the call fills."""
    if isinstance(arg, ctypes.Structure):
        return type(arg)()
    return arg


def _answers(nvml: NvmlBackend, call: str, handle: object, rest: tuple[object, ...]) -> bool:
    try:
        out = getattr(nvml, call)(handle, *(_fresh(a) for a in rest))
    except pynvml.NVMLError:
        return False
    if call == "nvmlDeviceGetFieldValues":
        return all(int(e.nvmlReturn) == pynvml.NVML_SUCCESS for e in out)
    return True


def peers_answering(ctx: Any, gpu: int, call: str, args: tuple[object, ...]) -> list[int]:
    """Other GPUs of the same model name that answer ``call`` with the same arguments."""
    name = ctx.gpus[gpu].get("name")
    out = []
    for g in ctx.gpus:
        i = int(g["index"])
        if i == gpu or g.get("name") != name or ctx.handles[i] is None:
            continue
        if _answers(ctx.nvml, call, ctx.handles[i], args[1:]):
            out.append(i)
    return out


def judge_unsupported(ctx: Any, gpu: int | None, exc: BaseException) -> Finding | None:
    """A failing Finding when this NOT_SUPPORTED is a fault of the GPU, else None."""
    if gpu is None or not isinstance(exc, pynvml.NVMLError):
        return None
    if error_name(exc) != "NOT_SUPPORTED":
        return None
    call = getattr(exc, "nvml_call", None)
    args = getattr(exc, "nvml_args", None)
    if not call or args is None:
        return None
    policy = nvml_policy()
    details: dict[str, object] = {"nvml_error": "NOT_SUPPORTED", "call": call}
    arch = ctx.gpus[gpu].get("arch")
    need = policy.min_arch.get(call)
    if need is not None and isinstance(arch, int) and arch >= need.arch:
        return bad(
            policy.peer_action,
            f"{call} returned NOT_SUPPORTED ({error_label(exc)}), but every GPU of this "
            "architecture supports it: the GPU is in a degraded state",
            source=need.source,
            details={**details, "arch": arch, "min_arch": need.arch},
        )
    peers = peers_answering(ctx, gpu, call, tuple(args))
    if peers:
        return bad(
            policy.peer_action,
            f"{call} returned NOT_SUPPORTED ({error_label(exc)}), but GPU(s) {peers} of the "
            "same model answer it: this GPU is in a degraded state",
            source=policy.peer_source,
            details={**details, "peers_answering": peers},
        )
    return None
