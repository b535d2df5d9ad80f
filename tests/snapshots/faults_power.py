"""Power limits where NVIDIA makes the TDP configurable: the H100 NVL's 350-400 W.

A one-GPU NC40ads H100 v5 (no NVSwitch) of the training stack's Azure image, which pins
fabric manager for the stack's NVSwitch shapes: the pin alone does not make this host need
fabric manager (the base passes). Its GPU at 350 W is inside NVIDIA's configurable range and
passes; at 300 W it is capped below the range and fails.
"""

from __future__ import annotations

from snaplib import Fault, both, gpu_set

NVL = (
    "NVIDIA H100 NVL product brief and datasheet: Max thermal design power (TDP) 350-400 W "
    "(configurable); images/compat/gpus.yaml H100-NVL power min_w 350, max_w 400; "
    "validators/data/thresholds.yaml power.limit_min_fraction"
)

FAULTS: dict[str, Fault] = {
    "nvl-power-350w-in-range": Fault(
        ("h100nvl-1x-fm-pinned",),
        gpu_set("nvmlDeviceGetEnforcedPowerLimit", 350_000, gpu=None),
        {},
        source=f"{NVL}: 350 W is the low end of the configurable range, in spec",
    ),
    "nvl-power-350w-default-350w": Fault(
        ("h100nvl-1x-fm-pinned",),
        both(
            gpu_set("nvmlDeviceGetEnforcedPowerLimit", 350_000, gpu=None),
            gpu_set("nvmlDeviceGetPowerManagementDefaultLimit", 350_000, gpu=None),
        ),
        {},
        source=f"{NVL}: a board configured at 350 W reports that as its default too",
    ),
    "nvl-power-capped-300w": Fault(
        ("h100nvl-1x-fm-pinned",),
        gpu_set("nvmlDeviceGetEnforcedPowerLimit", 300_000, gpu=None),
        {"gpu.power.limit": "REBOOT"},
        source=f"{NVL}: 300 W is below the configurable range: the GPU is capped (nvidia-smi -pl)",
    ),
}
