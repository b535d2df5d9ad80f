"""Run the image's own validator inside the booted candidate and bring the receipt back.

The validator role installs imagectl into /opt/imagectl in the image and the build
writes the stack's expectations to /etc/imagectl/expect.json; here we only call it over
SSH, exactly as an operator would on a cloud host::

    /opt/imagectl/bin/imagectl validate --profile boot --expect /etc/imagectl/expect.json \\
        --image-id sha256:... -o /var/tmp/imagectl-receipt.json

and copy the receipt back. ``load_receipt`` (imagectl.validators.receipt) parses it; the
summary below reads the fields every receipt has (verdict, worst action, checks).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.embedded.qemu import Vm
from imagectl.errors import UserError

REMOTE_IMAGECTL = "/opt/imagectl/bin/imagectl"
REMOTE_EXPECT = "/etc/imagectl/expect.json"
REMOTE_RECEIPT = "/var/tmp/imagectl-receipt.json"


@dataclass
class ValidationOutcome:
    receipt_path: Path
    receipt: dict[str, Any]
    exit_code: int
    verdict: str
    worst_action: str
    failing: list[dict[str, str]] = field(default_factory=list)
    output_tail: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


def _checks(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    for key in ("checks", "results"):
        value = receipt.get(key)
        if isinstance(value, list):
            return [c for c in value if isinstance(c, dict)]
        if isinstance(value, dict):
            return [{"name": k, **v} for k, v in value.items() if isinstance(v, dict)]
    return []


def failing_checks(receipt: dict[str, Any]) -> list[dict[str, str]]:  # id, title, message
    """Name and message of every check whose outcome is not a pass or a skip."""
    out = []
    for check in _checks(receipt):
        outcome = str(check.get("outcome") or check.get("status") or "").lower()
        if outcome in ("fail", "failed", "error"):
            out.append(
                {
                    "name": str(check.get("id") or check.get("name") or "?"),
                    "title": str(check.get("title") or ""),
                    "message": str(check.get("message") or check.get("detail") or ""),
                    "action": str(check.get("action") or ""),
                }
            )
    return out


def read_receipt(path: Path) -> dict[str, Any]:
    """The receipt as a dict, parsed by the validator's own loader when it is installed."""
    try:
        from imagectl.validators.receipt import load_receipt
    except ImportError:  # the validator branch not merged yet: plain JSON
        return dict(json.loads(path.read_text()))
    loaded: Any = load_receipt(path)
    if isinstance(loaded, dict):
        return loaded
    for attr in ("to_dict", "model_dump", "as_dict"):
        if hasattr(loaded, attr):
            return dict(getattr(loaded, attr)())
    return dict(json.loads(path.read_text()))


def validate_in_vm(
    vm: Vm,
    *,
    image_id: str,
    profile: str,
    dest: Path,
    shape: str | None = None,
    timeout: float = 900,
) -> ValidationOutcome:
    code, out = vm.ssh.try_run(f"test -x {REMOTE_IMAGECTL} && test -r {REMOTE_EXPECT}")
    if code != 0:
        raise UserError(
            f"the candidate has no validator ({REMOTE_IMAGECTL}) or no expectations "
            f"({REMOTE_EXPECT})",
            hint="The validator role of playbooks/site.yml installs both; look at packer.log",
        )
    command = " ".join(
        shlex.quote(a)
        for a in (
            REMOTE_IMAGECTL, "validate", "--profile", profile, "--expect", REMOTE_EXPECT,
            "--image-id", image_id, "-o", REMOTE_RECEIPT,
            *(["--shape", shape] if shape else []),
        )
    )  # fmt: skip
    vm.ssh.try_run(f"rm -f {REMOTE_RECEIPT}")
    code, out = vm.ssh.try_run(command, timeout=timeout)
    code_got, _ = vm.ssh.try_run(f"test -s {REMOTE_RECEIPT}")
    if code_got != 0:
        raise UserError(
            f"the validator wrote no receipt (exit {code}): {out.strip()[-600:]}",
            hint="Run it by hand in the VM to see why",
        )
    vm.ssh.get(REMOTE_RECEIPT, dest)
    receipt = read_receipt(dest)
    verdict = str(receipt.get("verdict") or ("pass" if code == 0 else "fail")).lower()
    worst = str(receipt.get("worst_action") or "NONE")
    return ValidationOutcome(
        receipt_path=dest,
        receipt=receipt,
        exit_code=code,
        verdict=verdict,
        worst_action=worst,
        failing=failing_checks(receipt),
        output_tail=out[-2000:],
    )
