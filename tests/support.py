"""Helpers shared by tests in every folder: import them as ``from tests.support import ...``
(``from conftest import ...`` is ambiguous: every folder's conftest.py is named conftest).

- ``require_tool(name, extra_dirs=())``: the path of an external program; skip the test
  when it is missing, fail it instead when ``CI=true``.
- ``require(condition, reason)`` / ``require_root()`` / ``require_url(url)``: the same rule
  for any condition, for root rights, and for a reachable URL.
- ``default_signals``: ``preexec_fn`` for a child a test will signal: the signals a
  shell's background job or ``nohup`` starts ignored (SIGINT, SIGQUIT, SIGHUP) and SIGTERM
  go back to their defaults in the child, so Ctrl-C reaches it however the suite was
  started (``tests/test_signal_children.py`` holds every such test to it).
- ``flat(text)`` / ``CliText``: CLI output as a reader sees it, for text assertions: ANSI
  colour removed and every run of whitespace (a wrapped line's break included) one space,
  so an assertion cannot depend on the console's width, where a message wrapped, colour or
  the length of a temporary path inside it. ``CliText`` is a ``str`` whose ``in`` compares
  so (the ``cli`` fixture's ``out``/``err`` are ``CliText``); raw process output is
  compared as ``"..." in flat(proc.stderr)`` (``tests/test_cli_text_assertions.py`` holds
  every test to one of the two).
- ``make_receipt(image_id, stack, digest, ...)``: a whole validation receipt (the
  validator's ``Receipt`` model, schema-valid), finished ``age_hours`` ago; ``fields``
  replace any top-level field.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imagectl.validators.receipt import Receipt

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO


# ECMA-48 control sequences (SGR colour, cursor moves) as a terminal would consume them.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


# A needle holding a line break, a carriage return, a tab or an escape asks about the text's
# layout or its control characters themselves: compared as given.
_LAYOUT = re.compile(r"[\n\r\t\v\f\x1b]")


def _flat(text: str) -> str:
    return " ".join(_ANSI.sub("", text).split())


def flat(text: str) -> CliText:
    """``text`` as a reader sees it: control sequences removed, each run of whitespace (a
    line break a console inserted while wrapping included) one space, none at either end;
    as ``CliText``, so a word the console folded still matches."""
    return CliText(_flat(text))


def bare(text: str) -> str:
    """``text`` without control sequences or any whitespace: a folded word whole again."""
    return "".join(_ANSI.sub("", text).split())


class CliText(str):
    """A command's output, whose ``needle in text`` ignores how it was laid out: both sides
    compared after ``flat``, so where a console wrapped a message (its width, the length of
    a path in it) or whether it coloured it cannot decide an assertion; a word the console
    folded (one longer than its width) matches too. A needle holding a line break, another
    control character or only whitespace asks about the layout or those characters
    themselves (a line of its own, an inert ``\r``) and is compared as given."""

    __slots__ = ()

    def __contains__(self, needle: object) -> bool:
        if not isinstance(needle, str) or _LAYOUT.search(needle) or not _flat(needle):
            return super().__contains__(needle)  # type: ignore[operator]
        if str.__contains__(_flat(self), _flat(needle)):
            return True
        # a word longer than the console's width (a path under a long TMPDIR) is folded
        # inside itself: compared without any whitespace it reads whole again
        return str.__contains__(bare(self), bare(needle))

    def __add__(self, other: str) -> CliText:  # r.out + r.err stays CliText
        return CliText(str.__add__(self, other))

    def __radd__(self, other: str) -> CliText:
        return CliText(str.__add__(other, self))

    @property
    def flat(self) -> str:
        return _flat(self)


@dataclass
class CliResult:
    """What the ``cli`` fixture's run of a command gives: its exit code and its output, as
    ``CliText`` (``"..." in r.err`` ignores where the console wrapped a line)."""

    code: int
    out: CliText
    err: CliText

    def json(self) -> Any:
        return json.loads(self.out)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


IN_CI = in_ci()


# What a child a test signals must not inherit: a background job of a non-interactive shell
# starts with SIGINT and SIGQUIT ignored (POSIX, "Shell Execution Environment"), nohup
# ignores SIGHUP, and an ignored disposition survives exec (Python then installs no
# KeyboardInterrupt handler).
RESET_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM)


def default_signals() -> None:
    """``subprocess.Popen(..., preexec_fn=default_signals)``: the child starts with the
    default disposition of every signal in ``RESET_SIGNALS`` and none of them blocked."""
    for sig in RESET_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, RESET_SIGNALS)


def require(condition: bool, reason: str) -> None:
    """Skip locally / fail in CI when ``condition`` is false."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def require_tool(name: str, extra_dirs: Iterable[str] = ()) -> str:
    """Path of the program ``name`` (in ``extra_dirs``, next to the running Python, or on
    PATH); skip if missing, fail if missing under CI=true."""
    for folder in (*extra_dirs, str(Path(sys.executable).parent)):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    message = f"external tool '{name}' is not installed"
    if in_ci():
        pytest.fail(f"{message} (CI=true: missing tools are failures)", pytrace=False)
    pytest.skip(message)


def require_root() -> None:
    require(os.geteuid() == 0, "root rights are needed (debootstrap / chroot)")


def _require_module(module: str, extra: str) -> None:
    try:
        __import__(module)
    except ImportError:
        message = f"Python module '{module}' is not installed (pip install 'imagectl[{extra}]')"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def require_url(url: str, timeout: float = 20.0) -> None:
    """Skip when ``url`` cannot be fetched locally; fail when CI=true (CI reaches it)."""
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return
    except Exception as exc:  # any failure means: not reachable from here
        message = f"{url} is not reachable: {exc}"
    if IN_CI:
        pytest.fail(f"{message} (CI=true: the archive must be reachable)")
    pytest.skip(message)


def fake_torch_wheel(folder: Path, version: str = "2.9.1+cu128", cuda: str | None = "12.8") -> Path:
    """A wheel named and laid out like torch's (dist-info, ``torch/version.py`` with its
    CUDA variant), without torch's code: a stand-in at the package-index boundary for tests
    that check what the build installs, never for tests that run torch."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    dist = f"torch-{version.split('+')[0]}.dist-info"
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\n",
        "torch/version.py": (
            f"__version__ = {version!r}\ndebug = False\n"
            f"cuda: Optional[str] = {cuda!r}\nhip: Optional[str] = None\n"
        ),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: imagectl-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def simple_index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 "simple" index on disk serving ``wheels``; returns its file:// URL."""
    for wheel in wheels:
        project = root / wheel.name.split("-")[0].lower()
        project.mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, project / wheel.name)
        links = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in project.glob("*.whl"))
        (project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return root.as_uri()


def make_receipt(
    image_id: str | None,
    stack: str | None,
    digest: str | None,
    *,
    verdict: str = "pass",
    age_hours: float = 1.0,
    worst_action: str = "NONE",
    profile: str = "boot",
    mode: str = "live",
    host: str = "vm-1",
    **fields: object,
) -> Receipt:
    """A schema-valid receipt as the validator writes it: one software check, failing
    with ``worst_action`` when the verdict is fail."""
    finished = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=age_hours)
    outcome = "pass" if verdict == "pass" else "fail"
    check = {
        "id": "sw.driver.version",
        "title": "NVIDIA driver version matches the pin",
        "severity": "critical",
        "outcome": outcome,
        "action": "NONE" if outcome == "pass" else worst_action,
        "message": "" if outcome == "pass" else "driver 570.1 loaded, 580.95.05 pinned",
    }
    body: dict[str, object] = {
        "image_id": image_id,
        "stack": stack,
        "stack_digest": digest,
        "validator_version": "test",
        "profile": profile,
        "started_at": (finished - dt.timedelta(seconds=30)).isoformat(),
        "finished_at": finished.isoformat(),
        "duration_s": 30.0,
        "mode": mode,
        "host": {"hostname": host},
        "expectations": {},
        "gpus": [],
        "checks": [check],
        "summary": {outcome: 1},
        "verdict": verdict,
        "worst_action": worst_action,
    }
    body.update(fields)
    return Receipt.model_validate(body)


def one_look(argv: list[str]) -> list[str]:
    """A watcher unit's ``imagectl watch`` argv made to look once: its ``--interval N`` pair
    dropped (``--once`` refuses it: there is no time between looks to set)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--interval":
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return [*out, "--once"]
