"""The e2e session's first run (a cold ``imagectl run --stack local``), made and recorded.

The session's ``promoted_run`` fixture (conftest.py) makes it when the session starts,
or finds it made already: ``make test`` runs this file beside the unit suite,

    IMAGECTL_E2E_RUN_ID=ID python tests/embedded/first_run.py STATE

then the e2e session with ``IMAGECTL_E2E_STATE_DIR=STATE IMAGECTL_E2E_RUN_ID=ID``. The
record (``STATE/promoted-run.json``) holds the run's exit status, JSON and standard
error as the session would have seen them; the tests judge them as they judge their own
run (this file only makes it, and exits 0 whatever the run did; 2 on bad arguments).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RECORD = "promoted-run.json"
RUN_ID_ENV = "IMAGECTL_E2E_RUN_ID"


def run_local(
    state: Path, *args: str, timeout: float = 2400
) -> tuple[int, dict[str, Any] | None, str]:
    """``imagectl run --stack local ARGS --json`` in ``state``: (exit, JSON or None when
    it printed none, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env.update(IMAGECTL_STATE_DIR=str(state), COLUMNS="160")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "imagectl"), "--root", str(REPO), "run", *args,
         "--json"],
        capture_output=True, text=True, env=env, timeout=timeout, check=False,
    )  # fmt: skip
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        data = None
    return proc.returncode, data, proc.stderr


def write_record(
    record: Path, session: str, code: int, data: dict[str, Any] | None, stderr: str
) -> None:
    """The run, as the session's workers read it (whole or not at all)."""
    part = record.with_suffix(".part")
    part.write_text(json.dumps({"session": session, "code": code, "data": data,
                                "stderr": stderr}))  # fmt: skip
    part.replace(record)


def main(argv: list[str]) -> int:
    session = os.environ.get(RUN_ID_ENV, "")
    if len(argv) != 1 or not session:
        print(f"usage: {RUN_ID_ENV}=ID {Path(__file__).name} STATE_DIR", file=sys.stderr)
        return 2
    state = Path(argv[0])
    state.mkdir(parents=True, exist_ok=True)
    try:
        code, data, err = run_local(state)
    except subprocess.TimeoutExpired as exc:
        code, data, err = 124, None, f"imagectl run did not finish in {exc.timeout} s"
    write_record(state / RECORD, session, code, data, err)
    print(f"e2e first run: exit {code} (recorded in {state / RECORD})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
