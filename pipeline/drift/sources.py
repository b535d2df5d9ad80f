"""Where a stack's packages come from: the repository folders its upstream check reads.

- GPU stacks: NVIDIA's CUDA apt repository for the stack's distro and architecture,
  ``{base}/{os.repo_slug}/{x86_64|sbsa}``. The base defaults to NVIDIA's server and is
  overridden by ``--nvidia-repo-url`` / ``IMAGECTL_NVIDIA_REPO_URL`` (a mirror, or
  ``file://`` fixtures in tests).
- The ``local`` stack (Debian, no NVIDIA section): Debian's own archive from the stack's
  ``clouds.local.mirror``: ``{codename}``, ``{codename}-updates`` and the security archive
  ``{codename}-security`` (``IMAGECTL_DEBIAN_SECURITY_URL``, default: the mirror's
  sibling ``debian-security``).
"""

from __future__ import annotations

import os

from imagectl.stacks.schema import Stack

NVIDIA_REPO_URL = "https://developer.download.nvidia.com/compute/cuda/repos"
ENV_NVIDIA_REPO = "IMAGECTL_NVIDIA_REPO_URL"
ENV_DEBIAN_SECURITY = "IMAGECTL_DEBIAN_SECURITY_URL"
DEBIAN_SECURITY_URL = "http://deb.debian.org/debian-security"

NVIDIA_ARCH = {"x86_64": "x86_64", "aarch64": "sbsa"}
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def nvidia_repo_folder(stack: Stack, base: str | None = None) -> str:
    base = (base or os.environ.get(ENV_NVIDIA_REPO) or NVIDIA_REPO_URL).rstrip("/")
    return f"{base}/{stack.os.repo_slug}/{NVIDIA_ARCH[stack.os.arch]}"


def debian_folders(stack: Stack, mirror: str) -> list[str]:
    """main, -updates and -security ``binary-<arch>`` folders for the stack's release."""
    mirror = mirror.rstrip("/")
    security = os.environ.get(ENV_DEBIAN_SECURITY) or (
        mirror + "-security" if mirror.endswith("/debian") else DEBIAN_SECURITY_URL
    )
    code = stack.os.codename
    arch = DEBIAN_ARCH[stack.os.arch]
    return [
        f"{mirror}/dists/{code}/main/binary-{arch}",
        f"{mirror}/dists/{code}-updates/main/binary-{arch}",
        f"{security.rstrip('/')}/dists/{code}-security/main/binary-{arch}",
    ]
