"""GEMM smoke: bf16, fp16 and fp32 (tf32 off) on every device, checked and compared.

Correctness: seeded inputs are rounded to the dtype, multiplied on the device, and
compared with an fp64 product of the same rounded inputs on the host (relative error
against the largest reference entry, per-dtype tolerance; tf32 left on would break fp32's).
Consistency: cuBLAS documents bit-wise identical results for the same call on GPUs of the
same architecture and SM count, so every GPU must return the same bits as the majority; a
GPU that computes a different answer is faulty. Throughput: TFLOP/s = 2 n^3 / t.

Test hook (documented, honoured by this code path): ``IMAGECTL_FAULT_GEMM=INDEX`` corrupts
element [0, 0] of device INDEX's result (position in the device list) as a faulty ALU would;
``INDEX:ulp`` flips only its lowest bit, an error inside the tolerance that only the
cross-GPU comparison can see.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor
    from torch import device as TorchDevice
    from torch import dtype as TorchDtype

FAULT_ENV = "IMAGECTL_FAULT_GEMM"
DTYPES = ("bf16", "fp16", "fp32")
# Max |C - C_ref| / max |C_ref|: output rounding dominates (bf16 eps 2^-8, fp16 2^-11);
# fp32 with tf32 off stays near 1e-6, tf32 on would show ~1e-3.
TOLERANCE = {"bf16": 1.6e-2, "fp16": 2e-3, "fp32": 2e-5}


@dataclass
class GemmRun:
    device_index: int
    dtype: str
    rel_error: float
    tflops: float | None
    result: Tensor | None = field(repr=False)  # host copy of the checked product
    error: str | None = None

    @property
    def correct(self) -> bool:
        return self.error is None and self.rel_error <= TOLERANCE[self.dtype]


def torch_dtype(torch: ModuleType, name: str) -> TorchDtype:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def reference_inputs(torch: ModuleType, n: int, dtype: str) -> tuple[Tensor, Tensor, Tensor]:
    """Seeded host inputs rounded to ``dtype``, and their fp64 product."""
    gen = torch.Generator().manual_seed(20260401)
    a = (torch.rand(n, n, generator=gen, dtype=torch.float64) * 2 - 1).to(torch_dtype(torch, dtype))
    b = (torch.rand(n, n, generator=gen, dtype=torch.float64) * 2 - 1).to(torch_dtype(torch, dtype))
    return a, b, a.double() @ b.double()


def _sync(torch: ModuleType, dev: TorchDevice) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _throughput(torch: ModuleType, dev: TorchDevice, dtype: str, n: int, iters: int) -> float:
    a = torch.randn(n, n, device=dev, dtype=torch_dtype(torch, dtype))
    b = torch.randn(n, n, device=dev, dtype=torch_dtype(torch, dtype))
    c = torch.empty(n, n, device=dev, dtype=torch_dtype(torch, dtype))
    torch.matmul(a, b, out=c)  # warm-up: cuBLAS handle and heuristics
    _sync(torch, dev)
    if dev.type == "cuda":
        # Events are recorded on the current stream of the current device: make it ``dev``'s.
        with torch.cuda.device(dev):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            torch.matmul(a, b, out=c)
        seconds = time.perf_counter() - t0
    return 2.0 * n**3 * iters / seconds / 1e12


def _inject(torch: ModuleType, out: Tensor, ulp: bool) -> None:
    if ulp:
        bits = out.view(torch.int32 if out.dtype == torch.float32 else torch.int16)
        bits[0, 0] ^= 1
    else:
        out[0, 0] = -out[0, 0] + 1


def run_gemm(
    torch: ModuleType,
    devices: list[TorchDevice],
    dtype: str,
    *,
    check_n: int,
    perf_n: int,
    iters: int,
) -> list[GemmRun]:
    """Check and time one dtype on every device (tf32 forced off, restored after)."""
    fault = os.environ.get(FAULT_ENV)
    a, b, ref = reference_inputs(torch, check_n, dtype)
    scale = float(ref.abs().max())
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    runs = []
    try:
        for index, dev in enumerate(devices):
            try:
                out = (a.to(dev) @ b.to(dev)).cpu()
                if fault is not None and int(fault.split(":")[0]) == index:
                    _inject(torch, out, fault.endswith(":ulp"))
                rel = float((out.double() - ref).abs().max()) / scale
                tflops = _throughput(torch, dev, dtype, perf_n, iters)
                runs.append(GemmRun(index, dtype, rel, tflops, out))
            except Exception as exc:  # one device failing must not hide the others
                runs.append(
                    GemmRun(index, dtype, float("inf"), None, None, f"{type(exc).__name__}: {exc}")
                )
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return runs


def consistency(torch: ModuleType, runs: list[GemmRun]) -> dict[str, object]:
    """Group devices by bit-identical results; the largest group is the reference.

    Returns ``{"groups": [[indexes], ...], "outliers": [indexes], "max_abs_diff": {index: x}}``.
    With two devices that disagree there is no majority: both are outliers.
    """
    groups: list[list[tuple[GemmRun, Tensor]]] = []  # each run beside its checked product
    for run, result in ((r, r.result) for r in runs if r.result is not None):
        for group in groups:
            if torch.equal(group[0][1], result):
                group.append((run, result))
                break
        else:
            groups.append([(run, result)])
    groups.sort(key=len, reverse=True)
    outliers: list[int] = []
    diffs: dict[int, float] = {}
    if len(groups) > 1:
        majority = groups[0] if len(groups[0]) > len(groups[1]) else []
        ref = groups[0][0][1].double()
        for group in groups:
            if group is majority:
                continue
            for run, result in group:
                outliers.append(run.device_index)
                diffs[run.device_index] = float((result.double() - ref).abs().max())
    return {
        "groups": [[r.device_index for r, _ in g] for g in groups],
        "outliers": sorted(outliers),
        "max_abs_diff": diffs,
    }
