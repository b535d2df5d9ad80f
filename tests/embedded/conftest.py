"""Fixtures shared by the local end-to-end tests: one state folder per session.

``make e2e`` runs them on two xdist workers (``--dist loadgroup``): the first run of the
session (a cold build, validation and promotion) happens once, under a lock, in a state
folder both workers share; then the tests that reuse its candidate run in two groups at
once (``xdist_group``: "local" the build and the fault in that shared folder, which must
not run at once; "clouds" the booted-guest validations; the tests in state folders of
their own (states.py) balance the two), each guest on its own core. On pytest 9.2 the
grouping needs tests/xdist_groups.py (pytest-dev/pytest-xdist#1386: loadgroup silently
stops grouping); ``tests/test_xdist_groups.py`` checks it.

``make test`` makes that first run beside the unit suite instead (``first_run.py``: a
cold run in a fresh state folder, recorded under an id), where it uses the CPU the unit
suite leaves; the session then finds it through ``IMAGECTL_E2E_STATE_DIR`` and
``IMAGECTL_E2E_RUN_ID`` and both workers start on the tests at once. On its own, the
first run ran while the second worker waited on it for five minutes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

import first_run  # tests/embedded/first_run.py
import pytest
from needs import require_root, require_tool

E2E_TOOLS = ("debootstrap", "qemu-system-x86_64", "qemu-img", "packer", "ansible-playbook",
             "mkfs.ext4", "debugfs", "ssh", "scp", "ssh-keygen")  # fmt: skip


@pytest.fixture(scope="session")
def e2e_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """State folder (base image, candidates, catalog, registry) for the e2e tests.

    ``IMAGECTL_E2E_STATE_DIR`` keeps it between sessions (the base image is then built
    once); otherwise a fresh temporary folder: a cold run.
    """
    require_root()
    for tool in E2E_TOOLS:
        require_tool(tool)
    kept = os.environ.get("IMAGECTL_E2E_STATE_DIR")
    if kept:
        path = Path(kept)
    elif os.environ.get("PYTEST_XDIST_WORKER"):  # one folder for every worker's session
        path = tmp_path_factory.getbasetemp().parent / "e2e-state"
    else:
        path = tmp_path_factory.mktemp("e2e-state")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(path: Path):  # type: ignore[no-untyped-def]
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _printed_json(
    code: int, data: dict[str, Any] | None, err: str
) -> tuple[int, dict[str, Any], str]:
    """A run of ``imagectl run --json`` that printed its JSON; else the test fails."""
    if data is None:
        pytest.fail(f"no JSON from imagectl run (exit {code}):\n{err[-4000:]}")
    return code, data, err


def run_local(state: Path, *args: str, timeout: float = 2400) -> tuple[int, dict[str, Any], str]:
    """``imagectl run --stack local ARGS --json`` in ``state``: (exit, JSON, stderr)."""
    return _printed_json(*first_run.run_local(state, *args, timeout=timeout))


@pytest.fixture(scope="session")
def promoted_run(e2e_state: Path) -> tuple[int, dict[str, Any], str]:
    """The first ``imagectl run`` of the session (cold unless IMAGECTL_E2E_STATE_DIR
    keeps a state folder): its candidate is what the other e2e tests reuse. Under xdist
    the first worker to take the lock runs it; the others read what it recorded. A run
    ``first_run.py`` made before the session, recorded under ``IMAGECTL_E2E_RUN_ID``, is
    that first run."""
    record = e2e_state / first_run.RECORD
    with _locked(e2e_state / ".promoted-run.lock"):
        session = os.environ.get(first_run.RUN_ID_ENV) or os.environ.get(
            "PYTEST_XDIST_TESTRUNUID", ""
        )  # the same in every worker
        if session and record.is_file():
            done = json.loads(record.read_text())
            if done["session"] == session:
                return _printed_json(done["code"], done["data"], done["stderr"])
        code, data, err = run_local(e2e_state)
        first_run.write_record(record, session, code, data, err)
        return code, data, err
