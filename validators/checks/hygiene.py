"""Image hygiene (candidate images): nothing from the build baked into the image.

Judged on a file tree (``--hygiene-root``, default ``/``). On a booted root, SSH host keys,
shell history, users' keys and users' credentials are normal once the machine has booted
(its users made them), so only files older than the machine's first boot (cloud-init's
instance directory or the machine-id) count as baked in, and the others are neither judged
nor listed in the receipt; on an image tree (not booted) anything present is baked in.
Fleet boot checks run without hygiene at all (``--no-hygiene``).
"""

from __future__ import annotations

from typing import Any

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip
from imagectl.validators.results import Action

SLACK_S = 120.0
SOURCE = "imagectl image hygiene policy; Azure/azhpc-images and cloud image guidelines"


def _hygiene(ctx: Context) -> dict[str, Any]:
    data: dict[str, Any] = ctx.fact("hygiene")
    return data


def _baked(h: dict[str, Any], entries: list[dict[str, Any]]) -> list[str] | None:
    """Entries baked into the image; None when that cannot be told on a booted root."""
    if not h.get("booted_root"):
        return [e["path"] for e in entries]
    first = h.get("first_boot")
    if first is None:
        return None if entries else []
    return [e["path"] for e in entries if e["mtime"] < first - SLACK_S]


@check(
    "image.ssh_host_keys",
    "No SSH host keys baked into the image",
    needs_nvml=False,
    timeout_action=Action.NONE,
)
def ssh_host_keys(ctx: Context) -> Finding:
    h = _hygiene(ctx)
    baked = _baked(h, h.get("ssh_host_keys") or [])
    if baked is None:
        return skip("host keys present; first boot time unknown, cannot tell baked from generated")
    if baked:
        return bad(
            Action.BLOCK_IMAGE,
            f"SSH host keys from the build: {', '.join(baked)} (every instance would share them)",
            measured=baked,
            expected=[],
            source=SOURCE,
        )
    return ok(measured=[], expected=[], source=SOURCE)


@check(
    "image.build_keys",
    "No build SSH keys (private keys, Packer keys)",
    needs_nvml=False,
    timeout_action=Action.NONE,
)
def build_keys(ctx: Context) -> Finding:
    h = _hygiene(ctx)
    found = _baked(h, h.get("build_keys") or [])
    if found is None:
        return skip("private keys present; first boot time unknown, cannot tell baked from users'")
    if found:
        return bad(
            Action.BLOCK_IMAGE,
            f"build keys left in the image: {', '.join(found)}",
            measured=found,
            expected=[],
            source=SOURCE,
        )
    return ok(measured=[], expected=[], source=SOURCE)


@check(
    "image.machine_id",
    "machine-id empty in the image",
    needs_nvml=False,
    timeout_action=Action.NONE,
)
def machine_id(ctx: Context) -> Finding:
    h = _hygiene(ctx)
    if h.get("booted_root"):
        return skip(
            "a booted host writes its machine-id at boot: judged on the image tree (--hygiene-root)"
        )
    mid = h.get("machine_id")
    if mid in (None, "", "uninitialized"):
        return ok(measured=mid, expected="empty", source=SOURCE)
    return bad(
        Action.BLOCK_IMAGE,
        f"machine-id '{mid}' baked in: every instance would share it "
        "(systemd, journald, DHCP client ids)",
        measured=mid,
        expected="empty",
        source=SOURCE,
    )


@check(
    "image.credentials",
    "No cloud or registry credentials",
    needs_nvml=False,
    timeout_action=Action.NONE,
)
def credentials(ctx: Context) -> Finding:
    h = _hygiene(ctx)
    found = _baked(h, h.get("credentials") or [])
    if found is None:
        return skip("credentials present; first boot time unknown, cannot tell baked from users'")
    if found:
        return bad(
            Action.BLOCK_IMAGE,
            f"credentials in the image: {', '.join(found)}",
            measured=found,
            expected=[],
            source=SOURCE,
        )
    return ok(measured=[], expected=[], source=SOURCE)


@check(
    "image.shell_history",
    "No shell history from the build",
    needs_nvml=False,
    timeout_action=Action.NONE,
)
def shell_history(ctx: Context) -> Finding:
    h = _hygiene(ctx)
    baked = _baked(h, h.get("shell_history") or [])
    if baked is None:
        return skip("history files present; first boot time unknown")
    if baked:
        return bad(
            Action.BLOCK_IMAGE,
            f"shell history from the build: {', '.join(baked)}",
            measured=baked,
            expected=[],
            source=SOURCE,
        )
    return ok(measured=[], expected=[], source=SOURCE)
