"""QEMU's machine protocol (QMP) over a unix socket: just what saved boots need.

One JSON object per line each way (docs/interop/qmp-spec: the greeting, then
``qmp_capabilities``, then commands answered by ``return`` or ``error``; ``event`` lines
come in between and are skipped). A QEMU that is gone or silent raises ``QmpError``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any


class QmpError(RuntimeError):
    pass


class Qmp:
    def __init__(self, path: Path, *, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(path))
                break
            except OSError as exc:
                sock.close()
                if time.monotonic() >= deadline:
                    raise QmpError(f"no QMP socket at {path}: {exc}") from exc
                time.sleep(0.1)
        sock.settimeout(timeout_s)
        self._sock = sock
        self._file = sock.makefile("rw", encoding="utf-8", newline="\n")
        self._read()  # the greeting
        self.cmd("qmp_capabilities")

    def _read(self) -> dict[str, object]:
        try:
            line = self._file.readline()
        except OSError as exc:
            raise QmpError(f"QMP: {exc}") from exc
        if not line:
            raise QmpError("QMP: QEMU closed the connection")
        data: dict[str, object] = json.loads(line)
        return data

    def cmd(self, name: str, **arguments: Any) -> Any:
        """Run ``name``; its ``return`` value, or ``QmpError`` with QEMU's reason."""
        message: dict[str, object] = {"execute": name}
        if arguments:
            message["arguments"] = arguments
        try:
            self._file.write(json.dumps(message) + "\n")
            self._file.flush()
        except OSError as exc:
            raise QmpError(f"QMP {name}: {exc}") from exc
        while True:
            reply = self._read()
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                error = reply["error"]
                if not isinstance(error, dict):  # QMP spec: an object (class, desc)
                    error = {"desc": error}
                raise QmpError(f"QMP {name}: {error.get('class')}: {error.get('desc')}")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            self._sock.close()

    def __enter__(self) -> Qmp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
