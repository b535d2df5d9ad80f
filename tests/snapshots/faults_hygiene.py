"""Fault class (issue: fleet boot checks judge the machine, not its users): on a running
node, files its users made after the first boot are theirs, not the image's. A user's SSH
key or cloud credentials never make a BLOCK_IMAGE receipt; the same files older than the
first boot were baked into the image and do."""

from __future__ import annotations

from snaplib import T_FIRST_BOOT, Fault, host_set

POLICY = (
    "imagectl image hygiene: on a booted root only files older than the first boot "
    "(cloud-init's instance directory, else the machine-id) are baked into the image"
)
LATER = T_FIRST_BOOT + 86400.0  # a day after the first boot: the node's users
EARLIER = T_FIRST_BOOT - 3600.0  # before the first boot: the build

FAULTS: dict[str, Fault] = {
    "user-cloud-credentials-after-boot": Fault(
        ("h100-sxm-8x", "l4-1x"),
        host_set(
            "hygiene.credentials",
            [{"path": "/home/alice/.aws/credentials", "size": 116, "mtime": LATER}],
        ),
        {},
        source=POLICY,
    ),
    "user-ssh-key-after-boot": Fault(
        ("h200-8x", "a100-sxm-80gb-8x"),
        host_set(
            "hygiene.build_keys",
            [{"path": "/home/bob/.ssh/id_ed25519", "size": 411, "mtime": LATER}],
        ),
        {},
        source=POLICY,
    ),
    "build-key-baked": Fault(
        ("h100-sxm-8x", "l4-1x"),
        host_set(
            "hygiene.build_keys",
            [{"path": "/root/.ssh/packer_ed25519", "size": 411, "mtime": EARLIER}],
        ),
        {"image.build_keys": "BLOCK_IMAGE"},
        source=POLICY,
    ),
}
