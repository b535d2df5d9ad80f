"""Start the collective workers, watch them, stop them: a hang never hangs the validator.

Single node: one worker process per rank (per GPU, or ``ranks`` on CPU), each in its own
session, with the torchrun environment and a rendezvous on 127.0.0.1 at a free port.
Multi node: one torchrun elastic agent (``python -m torch.distributed.run``) with the
c10d rendezvous backend at the hostfile's first host; the same command runs on every host.

The parent enforces the timeouts itself (gloo/NCCL timeouts are only a second line): all
local ranks must join within ``join_timeout_s``; after that, the run must make progress
(any rank's event) at least every ``op_timeout_s``. A rank that exits non-zero or reports
an error has died; the others get a short grace to finish or fail, then everything left
is killed (SIGTERM, then SIGKILL) and reaped, including workers of the torchrun agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from imagectl.validators import procs as registry
from imagectl.validators.collectives.events import EventReader, RankState
from imagectl.validators.collectives.hostfile import Hostfile

WORKER_MODULE = "imagectl.validators.collectives.worker"
POLL_S = 0.05
DIED_GRACE_S = 3.0
KILL_GRACE_S = 2.0


@dataclass
class Plan:
    device: str  # "cuda" or "cpu"
    ops: list[str]
    sizes: dict[str, list[int]]
    nranks: int  # local ranks (processes on this host)
    warmup: int = 1
    iters: int = 3
    join_timeout_s: float = 60.0  # from the first rank entering the rendezvous
    start_timeout_s: float = 300.0  # from launch (covers importing torch, the agent rendezvous)
    op_timeout_s: float = 60.0
    nodes: Hostfile | None = None
    env: dict[str, str] = field(default_factory=dict)
    # multi-node: this node's address in the hostfile (its fabric NIC's). torchrun's agent
    # advertises it (--local-addr) and the first host's agent serves the c10d store because
    # the hostfile says so (is_host): torch's own guess compares the endpoint with the
    # hostname's addresses only, and misses one on a secondary NIC
    local_addr: str | None = None


@dataclass
class Failure:
    kind: str  # "rendezvous" | "hang" | "died"
    message: str
    op: str | None = None
    bytes: int | None = None
    arrived: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    died: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class RunReport:
    plan: Plan
    world_size: int
    local_ranks: list[int]
    ranks: dict[int, RankState]
    launched_t: float
    duration_s: float
    exit_codes: dict[int, int | None]
    failure: Failure | None
    stderr_tail: dict[str, str]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _base_env(plan: Plan) -> dict[str, str]:
    env = dict(os.environ)
    env.update(plan.env)
    env.setdefault("PYTHONWARNINGS", "ignore")
    if plan.device == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _spawn(plan: Plan, cfg_path: str, run_dir: str) -> tuple[dict[str, subprocess.Popen], int]:
    """Start the processes; returns name -> Popen and the global world size."""
    env = _base_env(plan)
    procs: dict[str, subprocess.Popen] = {}
    if plan.nodes is None:
        port = free_port()
        for rank in range(plan.nranks):
            renv = dict(
                env,
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE=str(plan.nranks),
                LOCAL_WORLD_SIZE=str(plan.nranks),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
            )
            procs[f"rank-{rank}"] = _popen(
                [sys.executable, "-m", WORKER_MODULE, cfg_path], renv, run_dir, f"rank-{rank}"
            )
        return procs, plan.nranks
    nodes = plan.nodes
    rdzv_id = env.get("IMAGECTL_RDZV_ID", "imagectl-collectives")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nodes.nnodes}",
        f"--nproc-per-node={plan.nranks}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={nodes.endpoint}",
        f"--rdzv-id={rdzv_id}",
        f"--rdzv-conf=join_timeout={int(plan.start_timeout_s)}{_is_host(plan)}",
        *([f"--local-addr={plan.local_addr}"] if plan.local_addr else []),
        "--max-restarts=0",
        "--monitor-interval=0.1",
        # the agent's own logs go in our folder, removed with it (by default the agent
        # makes /tmp/torchelastic_* and never removes it: one per run, at every boot)
        f"--log-dir={os.path.join(run_dir, 'torchelastic')}",
        "-m",
        WORKER_MODULE,
        cfg_path,
    ]
    procs["agent"] = _popen(cmd, env, run_dir, "agent")
    return procs, nodes.nnodes * plan.nranks


def _is_host(plan: Plan) -> str:
    if plan.nodes is None or not plan.local_addr:
        return ""
    return f",is_host={'true' if plan.local_addr == plan.nodes.hosts[0] else 'false'}"


def _popen(cmd: list[str], env: dict[str, str], run_dir: str, name: str) -> subprocess.Popen:
    log = open(os.path.join(run_dir, f"{name}.stderr"), "wb")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        log.close()
    registry.register_group(proc.pid)  # killed by the session on a deadline or Ctrl-C
    return proc


def _kill_all(procs: dict[str, subprocess.Popen], states: dict[int, RankState]) -> None:
    """SIGTERM every process group we started and every worker pid we heard of, then SIGKILL."""
    host = socket.gethostname()
    worker_pids = {s.pid for s in states.values() if s.pid and s.host == host}
    groups = {p.pid for p in procs.values() if p.poll() is None}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        for pid in worker_pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
            time.sleep(POLL_S)
        worker_pids = {pid for pid in worker_pids if _alive(pid)}
        if not worker_pids and all(p.poll() is not None for p in procs.values()):
            break
    for proc in procs.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _died(
    procs: dict[str, subprocess.Popen],
    states: dict[int, RankState],
    known: dict[int, dict[str, Any]],
    now: float,
) -> dict[int, dict[str, Any]]:
    """Ranks that reported an error or exited non-zero, with when that was first seen."""
    died = {r: dict(d) for r, d in known.items()}
    for rank, state in states.items():
        if state.error and (rank not in died or died[rank]["error"] is None):
            seen = died.get(rank, {}).get("seen_t", state.last_t or now)
            died[rank] = {"error": state.error, "traceback": state.traceback, "seen_t": seen}
    for name, proc in procs.items():
        rc = proc.poll()
        if name.startswith("rank-") and rc not in (None, 0):
            rank = int(name[5:])
            info = died.setdefault(rank, {"error": None, "traceback": None, "seen_t": now})
            info["exit_code"] = rc
            if rc < 0:
                info["signal"] = signal.Signals(-rc).name
    for info in died.values():
        if info["error"] is None and "exit_code" in info:
            how = info.get("signal") or f"code {info['exit_code']}"
            info["error"] = f"exited ({how}) without reporting an error"
    return died


def _diagnose_hang(reader: EventReader, local: list[int]) -> Failure:
    states = reader.ranks
    waiting = [s.current for s in states.values() if s.current]
    if not waiting:
        last = {r: (states[r].last_event if r in states else None) for r in local}
        return Failure(
            "hang",
            f"no progress: no rank is inside a collective; last events {last}",
            arrived=[],
            missing=list(local),
        )
    op, size = max(set(waiting), key=waiting.count)
    arrived = sorted(r for r in local if r in states and (op, size) in states[r].entered)
    missing = sorted(r for r in local if r not in arrived)
    return Failure(
        "hang",
        f"{op} of {size} bytes hung: ranks {arrived} arrived, ranks {missing} never did",
        op=op,
        bytes=size,
        arrived=arrived,
        missing=missing,
    )


def _watch(
    plan: Plan, procs: dict[str, subprocess.Popen], reader: EventReader, launched: float
) -> tuple[Failure | None, dict[int, dict[str, object]]]:
    """Poll until every process exits, a rank dies (plus a grace), or a timeout fires."""
    died: dict[int, dict[str, Any]] = {}
    all_joined_t: float | None = None
    while True:
        reader.poll()
        now = time.time()
        local = _local_ranks(plan, reader)
        if all(p.poll() is not None for p in procs.values()):
            reader.poll()
            return None, _died(procs, reader.ranks, died, now)
        died = _died(procs, reader.ranks, died, now)
        if died:
            first = min(d["seen_t"] for d in died.values())
            if now - first > min(DIED_GRACE_S, plan.op_timeout_s):
                return None, died
        elif all_joined_t is None:
            states = [reader.ranks[r] for r in local if r in reader.ranks]
            if len(states) == plan.nranks and all(s.joined_t for s in states):
                all_joined_t = now
            else:
                entered = [s.rendezvous_t for s in states if s.rendezvous_t]
                deadline = launched + plan.start_timeout_s
                if entered and plan.nodes is None:
                    deadline = min(deadline, min(entered) + plan.join_timeout_s)
                if now > deadline:
                    return _rendezvous_failure(plan, reader, local), died
        else:
            last = max(reader.last_progress_t or 0.0, all_joined_t)
            if now - last > plan.op_timeout_s:
                failure = _diagnose_hang(reader, local)
                if plan.nodes is not None and failure.op and not failure.missing:
                    failure.message += (
                        "; every local rank arrived: a rank on another node did not "
                        "(see that node's report)"
                    )
                failure.message += f" (no progress for {plan.op_timeout_s:g} s)"
                return failure, died
        time.sleep(POLL_S)


def _rendezvous_failure(plan: Plan, reader: EventReader, local: list[int]) -> Failure:
    states = reader.ranks
    arrived = sorted(r for r in local if r in states and states[r].rendezvous_t)
    missing = sorted(set(range(plan.nranks)) - set(arrived)) if plan.nodes is None else []
    if plan.nodes is not None and not states:
        msg = (
            f"the torchrun c10d rendezvous at {plan.nodes.endpoint} did not complete within "
            f"{plan.start_timeout_s:g} s (expected {plan.nodes.nnodes} nodes); no local "
            "worker started"
        )
    else:
        msg = f"rendezvous incomplete: ranks {arrived} entered it, ranks {missing} never did"
    return Failure("rendezvous", msg, arrived=arrived, missing=missing)


PEER_LOSS_MARKERS = (
    "closed by peer",  # gloo tcp pair.cc
    "reset by peer",
    "remote worker",
    "remote process exited",  # NCCL remote error
    "ncclRemoteError",
    "communicator was aborted",  # ProcessGroupNCCL after a peer failure
)


def _is_peer_loss(error: str | None) -> bool:
    text = (error or "").lower()
    return any(m.lower() in text for m in PEER_LOSS_MARKERS)


def _died_failure(
    died: dict[int, dict[str, Any]], reader: EventReader, local: list[int]
) -> Failure:
    # The root cause first: a rank that lost a peer reports a connection error, often a
    # moment before the parent notices the peer's exit.
    order = sorted(died, key=lambda r: (_is_peer_loss(died[r]["error"]), died[r]["seen_t"], r))
    first = order[0]
    msg = f"rank {first} died: {died[first]['error']}"
    if len(order) > 1:
        msg += f"; ranks {order[1:]} failed after it"
    waiting = {r: reader.ranks[r].current for r in local if r in reader.ranks}
    where = {r: f"{w[0]} {w[1]} B" for r, w in waiting.items() if w}
    failure = Failure("died", msg, died=died)
    for w in waiting.values():
        if w:
            failure.op, failure.bytes = w
            break
    if failure.op is not None:
        key = (failure.op, failure.bytes)
        failure.arrived = sorted(
            r for r in local if r in reader.ranks and key in reader.ranks[r].entered
        )
        failure.missing = sorted(r for r in local if r not in failure.arrived)
    else:
        failure.missing = order
    if where:
        failure.message += f"; inside a collective when it died: {where}"
    return failure


ERROR_WORDS = ("error", "exception", "failed", "refused", "timed out", "timeout")
# a Python exception's own line ("torch.distributed.DistNetworkError: ..."), else any line
# naming an error; C++ stack frames ("frame #2: c10::DistNetworkError...") are not reasons
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Timeout):")


def last_error_line(text: str, limit: int = 300) -> str:
    """The last line of a process's output that says why it failed (a launcher's own reason,
    such as torchrun's rendezvous error), shortened; "" if none does."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("frame #")]
    found = next((line for line in reversed(lines) if EXCEPTION_LINE.match(line)), "")
    if not found:
        words = (line for line in reversed(lines) if any(w in line.lower() for w in ERROR_WORDS))
        found = next(words, "")
    return found if len(found) <= limit else found[: limit - 1] + "…"


def run_collectives(plan: Plan) -> RunReport:
    run_dir = tempfile.mkdtemp(prefix="imagectl-collectives-")
    registry.register_folder(run_dir)
    events_dir = os.path.join(run_dir, "events")
    os.mkdir(events_dir)
    cfg = {
        "device": plan.device,
        "ops": plan.ops,
        "sizes": plan.sizes,
        "warmup": plan.warmup,
        "iters": plan.iters,
        # The backend's own timeout is a second line, well behind the parent's.
        "timeout_s": 2 * max(plan.op_timeout_s, plan.join_timeout_s) + 30,
        "events_dir": events_dir,
        "run_id": uuid.uuid4().hex,
    }
    cfg_path = os.path.join(run_dir, "config.json")
    with open(cfg_path, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    reader = EventReader(events_dir)
    launched = time.time()
    failure: Failure | None = None
    died: dict[int, dict[str, Any]] = {}
    children: dict[str, subprocess.Popen] = {}
    try:
        children, world = _spawn(plan, cfg_path, run_dir)
        failure, died = _watch(plan, children, reader, launched)
    except BaseException:
        _kill_all(children, reader.ranks)
        shutil.rmtree(run_dir, ignore_errors=True)
        registry.release(folder=run_dir)
        raise
    finally:
        _kill_all(children, reader.ranks)
        reader.poll()
    local = _local_ranks(plan, reader)
    # Errors reported after the stop are consequences (peers losing the dead rank); exit
    # codes caused by our own SIGTERM/SIGKILL are not deaths.
    for rank, state in reader.ranks.items():
        if state.error and rank not in died:
            died[rank] = {
                "error": state.error,
                "traceback": state.traceback,
                "seen_t": state.last_t,
            }
    if died and failure is None:
        failure = _died_failure(died, reader, local)
    elif failure is None:
        unfinished = [r for r in local if not (r in reader.ranks and reader.ranks[r].done_t)]
        if unfinished or len(local) < plan.nranks:
            codes = {n: p.returncode for n, p in children.items()}
            failure = Failure(
                "died",
                f"the launcher exited before every rank finished (exit codes {codes})",
                missing=unfinished,
            )
    elif died:
        failure.died = died
    tails = {}
    for name in children:
        path = os.path.join(run_dir, f"{name}.stderr")
        with open(path, "rb") as fh:
            tail = fh.read()[-4000:].decode("utf-8", "replace")
        if failure is not None and tail.strip():
            tails[name] = tail
    # the launcher's own reason where no rank gave one (torchrun's rendezvous error)
    if failure is not None and failure.kind in ("died", "rendezvous") and not died:
        said = [f"{n}: {line}" for n, t in tails.items() if (line := last_error_line(t))]
        if said:
            failure.message += "; " + "; ".join(said)
    shutil.rmtree(run_dir, ignore_errors=True)
    registry.release(folder=run_dir)
    for proc in children.values():
        registry.release(group=proc.pid)
    return RunReport(
        plan=plan,
        world_size=world,
        local_ranks=local,
        ranks=dict(reader.ranks),
        launched_t=launched,
        duration_s=time.time() - launched,
        exit_codes={
            int(n[5:]) if n.startswith("rank-") else -1: p.returncode for n, p in children.items()
        },
        failure=failure,
        stderr_tail=tails,
    )


def _local_ranks(plan: Plan, reader: EventReader) -> list[int]:
    if plan.nodes is None:
        return list(range(plan.nranks))
    return sorted(reader.ranks)
