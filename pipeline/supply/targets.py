"""The Pythons and wheel platforms an image's validator venv can have (one place)."""

from __future__ import annotations

# The distribution's own python3 (the validator venv's interpreter): Ubuntu 22.04 ships
# 3.10, 24.04 ships 3.12, Debian 12 ships 3.11 (each release's python3 package).
DISTRO_PYTHON = {"ubuntu-22.04": "3.10", "ubuntu-24.04": "3.12", "debian-12": "3.11"}
# Binary wheels the images' x86_64 glibc (2.35 and later) can load, newest tag first.
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux2010_x86_64",
)
