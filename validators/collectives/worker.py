"""One rank of the collective smoke test.

Run as ``python -m imagectl.validators.collectives.worker CONFIG``.

Launched once per GPU (or per CPU rank) by :mod:`.launch`, directly or through torchrun's
elastic agent, with the torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``). It appends one JSON event per line to
``<events_dir>/rank-<RANK>.jsonl`` and flushes after each, so the parent sees progress even
if this process is killed: ``started``, ``rendezvous``, ``joined``, then per collective and
size ``enter`` and ``exit`` (timing and value check), ``error`` with the traceback, and
``done``. The parent, not this process, decides that a collective hung.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any

from imagectl.validators.collectives import faults, patterns
from imagectl.validators.collectives.arithmetic import element_count

if TYPE_CHECKING:
    from torch import Tensor
    from torch import device as TorchDevice


class EventLog:
    def __init__(self, events_dir: str, rank: int):
        self.rank = rank
        self._fh = open(os.path.join(events_dir, f"rank-{rank}.jsonl"), "a", encoding="utf-8")  # noqa: SIM115

    def emit(self, ev: str, **fields: object) -> None:
        record = {"ev": ev, "rank": self.rank, "t": time.time(), **fields}
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()


def _fire(fault_list: list[faults.Fault], op: str, first: bool, log: EventLog) -> bool:
    """Apply injected faults for ``op``; returns True when this rank must corrupt its input."""
    corrupt = False
    for fault in fault_list:
        if not fault.applies(op, first):
            continue
        if fault.mode == "hang":
            log.emit("note", message=f"fault hook: hanging before {op}")
            while True:
                time.sleep(3600)
        if fault.mode == "raise":
            raise RuntimeError(f"injected fault ({faults.ENV}): rank {fault.rank} raises at {op}")
        if fault.mode == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.mode == "corrupt":
            corrupt = True
    return corrupt


def _run_op(
    torch: ModuleType, dist: ModuleType, op: str, send: Tensor, recv: Tensor | None
) -> None:
    if op == "all_reduce":
        dist.all_reduce(send)
    elif op == "broadcast":
        dist.broadcast(send, src=0)
    elif op == "all_gather":
        dist.all_gather_into_tensor(recv, send)
    elif op == "reduce_scatter":
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        fn(recv, send)
    elif op == "all_to_all":
        dist.all_to_all_single(recv, send)
    else:
        raise ValueError(f"unknown collective {op!r}")


def _one_size(ctx: dict[str, Any], op: str, size: int, corrupt: bool) -> dict[str, Any]:
    torch, dist, dev, rank, n = ctx["torch"], ctx["dist"], ctx["dev"], ctx["rank"], ctx["n"]
    count = element_count(size, n, op)
    send = patterns.inputs(torch, op, count, rank, n, dev)
    if corrupt:
        send[0] += 1000.0
    recv = patterns.output_buffer(torch, op, count, n, dev)
    # Correctness pass: one collective on fresh inputs, every element checked on every rank.
    _run_op(torch, dist, op, send, recv)
    ctx["sync"]()
    got = send if recv is None else recv
    mismatch = patterns.check(torch, op, got, count, rank, n)
    # Timed pass (nccl-tests: warm-up iterations, then the mean over timed iterations).
    if op == "all_reduce":
        send.zero_()  # in place: keep repeated sums finite
    for _ in range(ctx["warmup"]):
        _run_op(torch, dist, op, send, recv)
    ctx["sync"]()
    start = time.perf_counter()
    for _ in range(ctx["iters"]):
        _run_op(torch, dist, op, send, recv)
    ctx["sync"]()
    elapsed = (time.perf_counter() - start) / ctx["iters"]
    return {
        "bytes": count * 4,
        "time_us": elapsed * 1e6,
        "ok": mismatch is None,
        "mismatch": mismatch,
    }


def _nccl_version(torch: ModuleType) -> str | None:
    try:
        return ".".join(str(p) for p in torch.cuda.nccl.version())
    except Exception:
        return None


def _exit_with_parent(interval_s: float = 1.0) -> None:
    """Exit when the launcher (our parent) is gone: a killed validator leaves no rank behind."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _no_sync(*_: object) -> None:
    return None


def run(config: dict[str, Any]) -> int:
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    _exit_with_parent()
    log = EventLog(config["events_dir"], rank)
    log.emit("started", pid=os.getpid(), host=socket.gethostname(), local_rank=local_rank)
    try:
        fault_list = faults.for_rank(rank)
        if any(f.mode == "never_join" for f in fault_list):
            log.emit("note", message="fault hook: never joining the rendezvous")
            while True:
                time.sleep(3600)
        import torch
        import torch.distributed as dist

        device = config["device"]
        if device == "cuda":
            torch.cuda.set_device(local_rank)
            dev = torch.device("cuda", local_rank)
            sync: Callable[[TorchDevice], None] = torch.cuda.synchronize
            backend = "nccl"
        else:
            dev = torch.device("cpu")
            sync = _no_sync  # gloo collectives on CPU tensors are synchronous
            backend = "gloo"
        log.emit("rendezvous", backend=backend)
        kwargs: dict[str, Any] = {"timeout": timedelta(seconds=config["timeout_s"])}
        if device == "cuda":
            kwargs["device_id"] = dev  # eager NCCL communicator creation
        dist.init_process_group(backend=backend, **kwargs)
        log.emit(
            "joined",
            backend=backend,
            world_size=dist.get_world_size(),
            nccl_version=_nccl_version(torch) if device == "cuda" else None,
            torch_version=torch.__version__,
        )
        ctx = {
            "torch": torch,
            "dist": dist,
            "dev": dev,
            "rank": rank,
            "n": n,
            "sync": sync,
            "log": log,
            "warmup": config["warmup"],
            "iters": config["iters"],
        }
        first = True
        for op in config["ops"]:
            for size in config["sizes"][op]:
                corrupt = _fire(fault_list, op, first, log)  # before "enter": never arrives
                log.emit("enter", op=op, bytes=size)
                result = _one_size(ctx, op, size, corrupt)
                if first:
                    log.emit("first_collective")
                    first = False
                log.emit("exit", op=op, requested_bytes=size, **result)
        dist.barrier()
        dist.destroy_process_group()
        log.emit("done")
        return 0
    except BaseException as exc:
        log.emit("error", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], encoding="utf-8") as fh:
        config = json.load(fh)
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
