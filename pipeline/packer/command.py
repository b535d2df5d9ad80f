"""Packer command lines: one function per sub-command, nothing run here."""

from __future__ import annotations

from pathlib import Path

from imagectl.packer.binary import PackerBinary


def build_command(
    binary: PackerBinary,
    template_dir: Path,
    var_file: Path,
    *,
    only: list[str] | None = None,
    extra_vars: dict[str, str] | None = None,
    force: bool = False,
) -> list[str]:
    """``packer build -machine-readable -var-file=F [-only=...] DIR``."""
    cmd = [binary.path, "build", "-machine-readable", "-color=false"]
    if force:
        cmd.append("-force")
    cmd.append(f"-var-file={var_file}")
    for key, value in sorted((extra_vars or {}).items()):
        cmd.append(f"-var={key}={value}")
    if only:
        cmd.append(f"-only={','.join(only)}")
    cmd.append(str(template_dir))
    return cmd


def validate_command(
    binary: PackerBinary,
    template_dir: Path,
    var_file: Path,
    *,
    syntax_only: bool = False,
) -> list[str]:
    cmd = [binary.path, "validate"]
    if syntax_only:
        cmd.append("-syntax-only")
    cmd += [f"-var-file={var_file}", str(template_dir)]
    return cmd
