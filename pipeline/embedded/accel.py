"""Choose QEMU's accelerator: KVM when it really runs a guest, TCG emulation otherwise.

``/dev/kvm`` existing is not enough: on some hosts it is a paravirtual flavour on which
a stock kernel hangs silently. The probe boots the base image's own kernel under KVM
(no disk) and requires its first console line ("Linux version") within a time limit;
anything else means TCG. The answer is cached per host boot and kernel (its content: the
same kernel in another state folder's base is the same answer) in the user's cache
folder (``imagectl.paths.cache_dir``), which every state folder shares: a probe that
fails burns a core for its whole time limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from imagectl.clouds.local.spec import SPEC as LOCAL
from imagectl.core.errors import UserError
from imagectl.embedded.procs import Children
from imagectl.paths import cache_dir, state_dir

ACCELS = ("auto", "kvm", "tcg")
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class AccelChoice:
    name: str  # kvm | tcg
    reason: str
    probe_s: float = 0.0


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def cache_key(kernel: Path) -> dict[str, str]:
    """What the probe's answer depends on: this boot of this host, and the kernel booted."""
    digest = hashlib.sha256(kernel.read_bytes()).hexdigest()
    return {"boot_id": _boot_id(), "kernel_sha256": digest}


def probe_kvm(kernel: Path, children: Children, workdir: Path, timeout: float) -> tuple[bool, str]:
    """Boot ``kernel`` under KVM without a disk; True if it prints its banner in time."""
    if not os.path.exists("/dev/kvm"):
        return False, "/dev/kvm does not exist"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is not readable and writable by this user"
    workdir.mkdir(parents=True, exist_ok=True)
    serial = workdir / "kvm-probe.serial.log"
    serial.unlink(missing_ok=True)
    argv = [
        "qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256", "-smp", "1",
        "-display", "none", "-monitor", "none", "-no-reboot",
        "-serial", f"file:{serial}", "-kernel", str(kernel),
        "-append", "console=ttyS0 panic=-1",
    ]  # fmt: skip
    proc = children.popen(argv, name="qemu kvm probe", stdout=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            text = serial.read_text(errors="replace") if serial.exists() else ""
            if "Linux version" in text:
                return True, "KVM booted the kernel"
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                lines = [ln for ln in out.strip().splitlines() if ln.strip()]
                first = lines[0][:160] if lines else "no output"
                return False, f"qemu -accel kvm exited {proc.returncode}: {first}"
            time.sleep(0.2)
        return False, f"KVM made no progress within {timeout:g} s (no kernel banner)"
    finally:
        children.stop(proc, grace_s=1)


def choose_accel(
    requested: str, kernel: Path, children: Children, *, timeout: float = PROBE_TIMEOUT_S
) -> AccelChoice:
    """``auto`` probes KVM (cached per host boot and kernel) and falls back to TCG;
    ``kvm`` is probed the same way and refused (exit 2) where KVM does not boot the
    kernel: a guest on a KVM that hangs silently would only time out much later."""
    if requested == "tcg":
        return AccelChoice("tcg", "requested")
    choice = _probed(kernel, children, timeout)
    if requested == "kvm":
        if choice.name != "kvm":
            why = choice.reason.removeprefix("TCG emulation: ")
            raise UserError(
                f"--accel kvm: KVM does not run a guest on this host ({why})",
                hint="Run with --accel auto (it falls back to TCG emulation) or --accel tcg",
            )
        return AccelChoice("kvm", f"requested; {choice.reason}", choice.probe_s)
    return choice


def _probed(kernel: Path, children: Children, timeout: float) -> AccelChoice:
    """The probe's answer for ``kernel`` on this boot: cached, else probed and cached."""
    cache = cache_dir() / LOCAL.name / "accel.json"
    key = cache_key(kernel)
    try:
        cached = json.loads(cache.read_text())
        if cached.get("key") == key:
            c = cached["choice"]
            return AccelChoice(c["name"], f"{c['reason']} (probed earlier this boot)", 0.0)
    except (OSError, ValueError, KeyError):
        pass
    start = time.monotonic()
    ok, why = probe_kvm(kernel, children, state_dir() / LOCAL.name, timeout)
    choice = AccelChoice(
        "kvm" if ok else "tcg",
        why if ok else f"TCG emulation: {why}",
        round(time.monotonic() - start, 1),
    )
    cache.parent.mkdir(parents=True, exist_ok=True)
    part = cache.with_name(f".{cache.name}.{os.getpid()}")  # another run may read it now
    part.write_text(json.dumps({"key": key, "choice": asdict(choice)}, indent=2) + "\n")
    os.replace(part, cache)
    return choice
