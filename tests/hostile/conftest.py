"""Hostile-input tests: the real ``imagectl`` as a subprocess, with a time limit.

``hostile(*args)`` runs ``.venv/bin/imagectl ARGS`` (the installed entry point, as a user
would) in the test's environment, kills it after ``timeout`` seconds (a hang fails the
test instead of stalling the suite) and checks what every bad input must end with: exit
2 and no Python traceback. The test then checks that the message names the input and
that nothing was executed, leaked or left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import flat

IMAGECTL = Path(sys.executable).with_name("imagectl")


# the least time a refusal may take before it counts as a hang
HANG_S = 180.0


@dataclass
class Refused:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        """stdout and stderr as one line each way (rich wraps long messages)."""
        return " ".join((self.out + " " + self.err).split())


def run_imagectl(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 30,
    code: int | None = 2,
) -> Refused:
    full_env = {**os.environ, "COLUMNS": "400", **(env or {})}
    # A hang, not a slow start: a cold imagectl on a loaded 2-core worker (a long-TMPDIR run
    # beside seven other jobs, load 15) took over 20 s to refuse a stack file, while what
    # these tests feed it (an alias bomb, /dev/zero) never ends unless refused.
    timeout = max(timeout, HANG_S)
    try:
        proc = subprocess.run(
            [str(IMAGECTL), *args],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"imagectl {' '.join(args)[:200]} still ran after {timeout}s (a hang)")
    result = Refused(proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in flat(proc.stderr), proc.stderr[-3000:]
    if code is not None:
        assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return result


@pytest.fixture
def hostile() -> Callable[..., Refused]:
    return run_imagectl
