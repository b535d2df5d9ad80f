"""Run the image's own validator inside the booted candidate and bring the receipt back.

The validator role installs imagectl into /opt/imagectl in the image and the build
writes the stack's expectations to /etc/imagectl/expect.json; here we only call it over
SSH, exactly as an operator would on a cloud host::

    /opt/imagectl/bin/imagectl validate --profile boot --expect /etc/imagectl/expect.json \\
        --image-id sha256:... -o /var/tmp/imagectl-receipt.json

and copy the receipt back. ``load_receipt`` (imagectl.validators.receipt) parses it into
the ``Receipt`` model; a corrupt or truncated receipt is bad input (exit 2).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from imagectl.embedded.qemu import Vm
from imagectl.errors import UserError
from imagectl.validators.receipt import Receipt, load_receipt

REMOTE_IMAGECTL = "/opt/imagectl/bin/imagectl"
REMOTE_EXPECT = "/etc/imagectl/expect.json"
REMOTE_RECEIPT = "/var/tmp/imagectl-receipt.json"


@dataclass
class ValidationOutcome:
    receipt_path: Path
    receipt: Receipt
    exit_code: int
    output_tail: str = ""

    @property
    def verdict(self) -> str:
        return self.receipt.verdict

    @property
    def worst_action(self) -> str:
        return self.receipt.worst_action.value

    @property
    def passed(self) -> bool:
        return self.receipt.passed

    @property
    def failing(self) -> list[dict[str, str]]:
        return failing_checks(self.receipt)


def failing_checks(receipt: Receipt) -> list[dict[str, str]]:
    """Name, title, message and action of every check that failed or errored."""
    return [
        {"name": c.id, "title": c.title, "message": c.message, "action": c.action.value}
        for c in receipt.failed_checks
    ]


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
    return ValidationOutcome(
        receipt_path=dest, receipt=load_receipt(dest), exit_code=code, output_tail=out[-2000:]
    )
