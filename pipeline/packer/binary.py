"""Find the packer binary and check that it is new enough.

Order: ``IMAGECTL_PACKER`` (a path), then ``packer`` on PATH. Packer >= 1.6.6 is needed
(HCL2 templates with ``source``/``build`` blocks); from 1.7 on the cloud builders are
plugins and the ``packer { required_plugins }`` block is used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from imagectl.core.errors import UserError

ENV_PACKER = "IMAGECTL_PACKER"
MIN_VERSION = (1, 6, 6)
PLUGINS_VERSION = (1, 7, 0)
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class PackerBinary:
    path: str
    version: tuple[int, int, int]

    @property
    def version_text(self) -> str:
        return ".".join(str(p) for p in self.version)

    @property
    def supports_plugin_blocks(self) -> bool:
        """``packer { required_plugins }`` and ``packer init`` exist from 1.7.0 on."""
        return self.version >= PLUGINS_VERSION


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``Packer v1.6.6`` / ``1.11.2`` / ``Packer v1.9.4 (abc)`` -> (1, 6, 6)."""
    m = _VERSION.search(text)
    if not m:
        return None
    return int(m[1]), int(m[2]), int(m[3])


def find_packer(
    explicit: str | None = None, *, minimum: tuple[int, int, int] = MIN_VERSION
) -> PackerBinary:
    """The packer binary to use, its version checked; UserError if missing or too old."""
    wanted = explicit or os.environ.get(ENV_PACKER)
    if wanted:
        path = wanted if os.sep in wanted else shutil.which(wanted)
        if not path or not Path(path).is_file() or not os.access(path, os.X_OK):
            raise UserError(
                f"the packer binary '{wanted}' (from {ENV_PACKER} or --packer) "
                "does not exist or is not executable",
                hint=f"Point {ENV_PACKER} at a packer >= {'.'.join(map(str, MIN_VERSION))}",
            )
    else:
        path = shutil.which("packer")
        if not path:
            raise UserError(
                "the 'packer' binary was not found on PATH",
                hint=(
                    "Install Packer >= 1.6.6 (apt-get install packer, or "
                    "https://developer.hashicorp.com/packer/install) or set "
                    f"{ENV_PACKER} to its path"
                ),
            )
    try:
        proc = subprocess.run(
            [path, "version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run '{path} version': {exc}") from exc
    version = parse_version(proc.stdout + proc.stderr)
    if proc.returncode != 0 or version is None:
        raise UserError(
            f"'{path} version' did not print a Packer version "
            f"(exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:200]})",
            hint=f"Check that {path} is HashiCorp Packer",
        )
    if version < minimum:
        raise UserError(
            f"Packer {'.'.join(map(str, version))} at {path} is too old; imagectl's HCL2 "
            f"templates need Packer >= {'.'.join(map(str, minimum))}",
            hint=f"Upgrade Packer or set {ENV_PACKER} to a newer binary",
        )
    return PackerBinary(path=path, version=version)
