"""Running one command for the fabric's record (``fi_info``, the NCCL run): its argv, exit
status, output and duration, or why it could not start; and the environment NCCL reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from imagectl.validators.fabric.model import CommandRun


def run_command(
    argv: list[str], timeout_s: float = 30.0, env: dict[str, str] | None = None
) -> CommandRun:
    if shutil.which(argv[0]) is None:
        return CommandRun(argv=argv, error=f"{argv[0]} not found on PATH")
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        return CommandRun(
            argv=argv,
            stdout=out,
            duration_s=time.monotonic() - start,
            error=f"no answer within {timeout_s:g} s",
        )
    except OSError as exc:
        return CommandRun(argv=argv, error=f"{type(exc).__name__}: {exc}")
    return CommandRun(
        argv=argv,
        exit_code=done.returncode,
        stdout=done.stdout,
        stderr_tail=done.stderr[-2000:],
        duration_s=round(time.monotonic() - start, 3),
    )


def nccl_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "FI_", "OFI_"))}
