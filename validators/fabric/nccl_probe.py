"""A tiny NCCL run: one process opens a communicator on every GPU (``ncclCommInitAll``)
through the system libnccl, with ``NCCL_DEBUG=INFO`` (the net plugin it loads, the network
it uses) and ``NCCL_TOPO_DUMP_FILE`` (the topology it detected), then closes it. No torch:
ctypes on libnccl.so.2, in a subprocess under a timeout."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from imagectl.validators.fabric.commands import nccl_environment, run_command
from imagectl.validators.fabric.model import NcclRun

_SCRIPT = r"""
import ctypes, sys
nccl = ctypes.CDLL("libnccl.so.2")
cudart = None
for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
    try:
        cudart = ctypes.CDLL(name); break
    except OSError:
        pass
n = ctypes.c_int(0)
if cudart is not None:
    cudart.cudaGetDeviceCount(ctypes.byref(n))
else:
    import pynvml
    pynvml.nvmlInit(); n.value = pynvml.nvmlDeviceGetCount()
comms = (ctypes.c_void_p * n.value)()
rc = nccl.ncclCommInitAll(comms, n, None)
print("imagectl-probe: ncclCommInitAll", rc, n.value, flush=True)
for i in range(n.value if rc == 0 else 0):
    nccl.ncclCommDestroy(comms[i])
sys.exit(0 if rc == 0 else 3)
"""


def probe(timeout_s: float = 120.0) -> NcclRun:
    with tempfile.TemporaryDirectory(prefix="imagectl-nccl-probe-") as tmp:
        dump = Path(tmp) / "topo.xml"
        env = {
            **os.environ,
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH",
            "NCCL_TOPO_DUMP_FILE": str(dump),
        }
        run = run_command([sys.executable, "-c", _SCRIPT], timeout_s=timeout_s, env=env)
        run.stdout = run.stdout[-200_000:]
        xml = dump.read_text(encoding="utf-8", errors="replace") if dump.is_file() else None
    return NcclRun(run=run, env=nccl_environment(), topo_xml=xml)
