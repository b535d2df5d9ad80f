"""Run playbooks/validate.yml over an inventory with ansible-runner; fetch receipts.

Each run gets a fresh ``private_data_dir`` (ansible-runner writes ``env/extravars`` and
``env/cmdline`` there, and they would leak into the next run). ``ansible-playbook`` is
taken from the running Python's folder first (a virtual environment), then PATH.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import imagectl.playbooks
from imagectl.core.errors import UserError
from imagectl.core.safetext import plain
from imagectl.paths import find_workspace

GROUP = "validate_hosts"


@dataclass
class FanoutResult:
    status: str  # successful | failed | timeout | canceled
    rc: int
    host_status: dict[str, str] = field(default_factory=dict)  # ok | failed | unreachable
    host_messages: dict[str, str] = field(default_factory=dict)


def playbook_path() -> Path:
    """playbooks/validate.yml of the workspace, else the copy shipped in the package."""
    candidate = find_workspace().playbooks / "validate.yml"
    if candidate.is_file():
        return candidate

    return Path(imagectl.playbooks.__file__).parent / "validate.yml"


def _ansible_playbook() -> str:
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file():
        return str(beside)
    found = shutil.which("ansible-playbook")
    if not found:
        raise UserError(
            "ansible-playbook is not installed",
            hint="Install it with: pip install 'imagectl[ansible]'",
        )
    return found


@dataclass(frozen=True)
class AnsibleEvent:
    """What the run reads of one ansible-runner event (its JSON: ``event``, and in
    ``event_data`` the ``host``, ``task`` and the task's result ``res``)."""

    kind: str
    host: str
    task: str
    result: dict[str, object]

    @classmethod
    def of(cls, event: dict[str, object]) -> AnsibleEvent:
        data = event.get("event_data")
        data = data if isinstance(data, dict) else {}
        res = data.get("res")
        return cls(
            kind=str(event.get("event") or ""),
            host=str(data.get("host") or ""),
            task=str(data.get("task") or ""),
            result=dict(res) if isinstance(res, dict) else {},
        )


def run_validate_playbook(
    *,
    hosts: dict[str, dict[str, object]],
    extravars: dict[str, object],
    on_event: Callable[[AnsibleEvent], None] | None = None,
    timeout_s: float | None = None,
    playbook: Path | None = None,
    cancel: Callable[[], bool] | None = None,
) -> FanoutResult:
    try:
        import ansible_runner
    except ImportError as exc:
        raise UserError(
            "ansible-runner is not installed",
            hint="Install it with: pip install 'imagectl[ansible]'",
        ) from exc
    binary = _ansible_playbook()
    book = playbook or playbook_path()
    inventory = {"all": {"children": {GROUP: {"hosts": hosts}}}}
    messages: dict[str, str] = {}

    def handler(raw: dict[str, object]) -> bool:
        event = AnsibleEvent.of(raw)
        if event.host and event.kind in ("runner_on_failed", "runner_on_unreachable"):
            text = str(event.result.get("msg") or "")
            # what the host's command said last (a crashed validator's one-paragraph error):
            # host-written text, through the one sanitizer, its tail kept
            said = plain(" ".join(str(event.result.get("stderr") or "").split()))
            if said:
                text = f"{text}: {said[-400:]}" if text else said[-400:]
            if event.result.get("rc") is not None:
                text = f"rc={event.result.get('rc')}: {text}"
            messages[event.host] = f"{event.task}: {text}".strip()[-600:]
        if on_event is not None:
            on_event(event)
        return True

    with tempfile.TemporaryDirectory(prefix="imagectl-ansible-") as pdd:
        env = {
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "True",
            "PATH": f"{Path(binary).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        runner = ansible_runner.run(
            private_data_dir=pdd,
            playbook=str(book),
            inventory=inventory,
            extravars=extravars,
            envvars=env,
            quiet=True,
            forks=max(1, len(hosts)),
            event_handler=handler,
            **({"timeout": int(timeout_s)} if timeout_s else {}),
            **({"cancel_callback": cancel} if cancel is not None else {}),
        )
        stats = runner.stats or {}
        tail = ""
        if runner.status != "successful":
            try:
                tail = runner.stdout.read()[-800:]
            except Exception:  # no stdout file when ansible-playbook never started
                tail = ""
    host_status = {}
    for host in hosts:
        if host in (stats.get("dark") or {}):
            host_status[host] = "unreachable"
        elif host in (stats.get("failures") or {}):
            host_status[host] = "failed"
        elif host in (stats.get("ok") or {}):
            host_status[host] = "ok"
        else:
            host_status[host] = "not run"
            messages.setdefault(host, f"ansible-playbook {runner.status}: {tail}".strip())
    return FanoutResult(str(runner.status), int(runner.rc or 0), host_status, messages)
