"""The doctor's check of the Packer a build runs: current Packer (>= 1.7) builds only with
the plugins ``images/<cloud>/plugins.pkr.hcl`` pins, at those exact versions, installed by
``packer init``; Debian's packer 1.6.6 has its builders built in (and the staged templates
leave that file out, imagectl.packer.templates).

Installed plugins are read where Packer looks for them (Packer documentation, "Installing
Plugins"): ``$PACKER_PLUGIN_PATH``, else ``~/.config/packer/plugins`` and
``~/.packer.d/plugins``, each plugin as
``<host>/<namespace>/<name>/packer-plugin-<name>_v<version>_x<api>_<os>_<arch>``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.packer.binary import PackerBinary, find_packer
from imagectl.packer.templates import PLUGINS_FILE

_REQUIRED = re.compile(
    r'(\w+)\s*=\s*\{\s*source\s*=\s*"([^"]+)"\s*version\s*=\s*"([^"]+)"\s*\}', re.S
)
_BINARY = re.compile(r"^packer-plugin-[\w-]+_v(\d+\.\d+\.\d+[^_]*)_x\d+\.\d+_")


def required_plugins(packer_dir: Path) -> dict[str, str]:
    """{source: version} of the cloud's ``plugins.pkr.hcl``."""
    path = packer_dir / PLUGINS_FILE
    if not path.is_file():
        return {}
    return {src: ver for _, src, ver in _REQUIRED.findall(path.read_text(encoding="utf-8"))}


def plugin_dirs() -> list[Path]:
    if os.environ.get("PACKER_PLUGIN_PATH"):
        return [Path(p) for p in os.environ["PACKER_PLUGIN_PATH"].split(os.pathsep) if p]
    home = Path.home()
    return [home / ".config" / "packer" / "plugins", home / ".packer.d" / "plugins"]


def installed_plugins(dirs: list[Path]) -> dict[str, set[str]]:
    """{source: {versions}} of the plugin binaries ``packer init`` left in ``dirs``."""
    found: dict[str, set[str]] = {}
    for base in dirs:
        if not base.is_dir():
            continue
        for binary in base.glob("*/*/*/packer-plugin-*"):
            m = _BINARY.match(binary.name)
            if m and not binary.name.endswith("_SHA256SUM") and os.access(binary, os.X_OK):
                source = "/".join(binary.relative_to(base).parts[:3])
                found.setdefault(source, set()).add(m[1])
    return found


def packer_plugins(packer_dir: Path, binary: PackerBinary | None = None) -> list[Finding]:
    """Whether the packer a build would run has what the cloud's templates need."""
    try:
        packer = binary or find_packer()
    except UserError as exc:
        return [Finding("packer", WARNING, exc.message, exc.hint or "install Packer")]
    if not packer.supports_plugin_blocks:
        return [
            Finding(
                "packer",
                OK,
                f"Packer {packer.version_text} ({packer.path}) has its builders built in",
            )
        ]
    want = required_plugins(packer_dir)
    have = installed_plugins(plugin_dirs())
    missing = [f"{src} {ver}" for src, ver in sorted(want.items()) if ver not in have.get(src, ())]
    if missing:
        where = ", ".join(str(d) for d in plugin_dirs())
        return [
            Finding(
                "packer",
                BLOCKER,
                f"Packer {packer.version_text} has not got the pinned plugin(s) "
                f"{', '.join(missing)} (looked in {where})",
                f"packer init {packer_dir / PLUGINS_FILE}",
            )
        ]
    pins = ", ".join(f"{src.rsplit('/', 1)[-1]} {ver}" for src, ver in sorted(want.items()))
    return [Finding("packer", OK, f"Packer {packer.version_text} with the pinned plugins: {pins}")]
