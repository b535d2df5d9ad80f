"""The CPU a local VM sees: one choice (imagectl.clouds.local.qemu.cpu_model) for the
local cloud's instances, the emulated clouds' guests and the Packer build."""

from __future__ import annotations

import re
from pathlib import Path

from imagectl.clouds.local.qemu import TCG_CPU, TORCH_CPU, VmSpec

IMAGES = Path(__file__).resolve().parents[2] / "images" / "local"


def _cpu(spec: VmSpec) -> tuple[str, str]:
    argv = spec.argv()
    return argv[argv.index("-accel") + 1], argv[argv.index("-cpu") + 1]


def test_tcg_guests_get_the_baseline_cpu_and_kvm_the_hosts() -> None:
    disk, kernel, initrd = Path("d.qcow2"), Path("vmlinuz"), Path("initrd.img")
    assert _cpu(VmSpec(disk, kernel, initrd)) == ("tcg", "qemu64,+rdrand")
    assert _cpu(VmSpec(disk, kernel, initrd, accel="kvm")) == ("kvm", "host")
    assert _cpu(VmSpec(disk, kernel, initrd, tcg_cpu=TORCH_CPU)) == ("tcg", "max")
    assert _cpu(VmSpec(disk, kernel, initrd, accel="kvm", tcg_cpu=TORCH_CPU)) == ("kvm", "host")
    # anything but kvm is emulation, as before
    assert _cpu(VmSpec(disk, kernel, initrd, accel="hvf")) == ("tcg", "qemu64,+rdrand")


def test_the_packer_build_takes_the_same_cpu() -> None:
    template = (IMAGES / "candidate.pkr.hcl").read_text()
    assert '["-cpu", var.local_cpu_model]' in template
    variables = (IMAGES / "variables.pkr.hcl").read_text()
    block = re.search(r'variable "local_cpu_model" \{(.*?)\n\}', variables, re.S)
    assert block is not None
    default = re.search(r'default\s*=\s*"([^"]+)"', block.group(1))
    assert default is not None and default.group(1) == TCG_CPU
