"""A test that signals a child holds however the suite was started.

A shell's background job starts with SIGINT and SIGQUIT ignored, ``nohup`` ignores SIGHUP,
and an ignored disposition survives fork and exec: a child of a suite started with
``make test &`` would ignore the Ctrl-C the test sends it (Python installs no
KeyboardInterrupt handler when it starts with SIGINT ignored) and the test would fail or
hang. Every child a test signals is started with ``tests.support.default_signals``.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import textwrap

from tests.support import REPO, RESET_SIGNALS, default_signals


def _sends_a_signal_to_a_child(tree: ast.AST) -> bool:
    """``proc.send_signal(...)``, ``os.kill(pid, ...)``/``os.killpg`` other than to itself."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "send_signal":
            return True
        if node.func.attr in ("kill", "killpg") and getattr(node.func.value, "id", "") == "os":
            target = ast.unparse(node.args[0]) if node.args else ""
            if "getpid" not in target:
                return True
    return False


def _popens_without_reset(tree: ast.AST) -> list[int]:
    missing = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "Popen"
        ):
            given = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if given.get("preexec_fn") != "default_signals":
                missing.append(node.lineno)
    return missing


def test_every_child_a_test_signals_starts_with_default_dispositions() -> None:
    offenders, signalling = [], []
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not _sends_a_signal_to_a_child(tree):
            continue
        missing = _popens_without_reset(tree)
        rel = path.relative_to(REPO).as_posix()
        signalling.append(rel)
        offenders += [f"{rel}:{line}" for line in missing]
    # the ones known today are really found (Ctrl-C to imagectl validate, to imagectl run,
    # to the sandbox, to the process-tree owner)
    assert {
        "tests/validators/test_validator_deadlines.py",
        "tests/embedded/test_interrupt.py",
        "tests/embedded/test_procs.py",
        "tests/clouds/test_aws_moto_server_e2e.py",
    } <= set(signalling)
    assert offenders == [], (
        "a test signals a child started without preexec_fn=default_signals (it inherits an "
        "ignored SIGINT when the suite runs as a background job):\n" + "\n".join(offenders)
    )


def test_the_scan_tells_a_signalled_child_from_a_self_signal() -> None:
    source = textwrap.dedent(
        """
        p = subprocess.Popen(["x"])
        os.kill(os.getpid(), signal.SIGINT)
        q = subprocess.Popen(["y"], preexec_fn=default_signals)
        """
    )
    tree = ast.parse(source)
    assert not _sends_a_signal_to_a_child(tree)
    assert _popens_without_reset(tree) == [2]
    assert _sends_a_signal_to_a_child(ast.parse("proc.send_signal(signal.SIGINT)"))
    assert _sends_a_signal_to_a_child(ast.parse("os.killpg(proc.pid, signal.SIGINT)"))


# Started as a background job starts: SIGINT ignored. It starts a Python child (with or
# without default_signals), Ctrl-Cs it once the child is up, and prints how it ended.
SPAWNER = """
import signal, subprocess, sys, time
from tests.support import default_signals
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN, "not started as a background job"
extra = {"preexec_fn": default_signals} if sys.argv[1] == "reset" else {}
child = subprocess.Popen(
    [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(2)"],
    stdout=subprocess.PIPE, text=True, **extra,
)
assert child.stdout.readline().strip() == "up"
child.send_signal(signal.SIGINT)
print(child.wait(timeout=30))
"""


def _as_background_job(mode: str) -> int:
    def ignore_sigint() -> None:  # what `cmd &` in a non-interactive shell does
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    out = subprocess.run(
        [sys.executable, "-c", SPAWNER, mode],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=ignore_sigint,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def test_a_child_started_with_default_signals_takes_ctrl_c_from_a_background_suite() -> None:
    assert _as_background_job("reset") == -signal.SIGINT  # KeyboardInterrupt, then died of it


def test_without_the_reset_the_child_ignores_ctrl_c() -> None:
    """What the Ctrl-C test of imagectl validate met under `make test &`: the child slept on."""
    assert _as_background_job("inherit") == 0


def test_default_signals_resets_every_listed_signal() -> None:
    script = (
        "import signal\n"
        "print(' '.join('ignored' if signal.getsignal(s) is signal.SIG_IGN else 'default'"
        f" for s in {[int(s) for s in RESET_SIGNALS]}))\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    )

    def ignore_all() -> None:
        for sig in RESET_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        default_signals()

    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        preexec_fn=ignore_all,
        check=True,
    )
    dispositions, keyboard_interrupt = out.stdout.splitlines()
    assert dispositions.split() == ["default"] * len(RESET_SIGNALS)
    assert keyboard_interrupt == "True"  # Python's own Ctrl-C handler is back
