"""Stage a cloud's template folder for the packer binary at hand.

``images/<cloud>/`` holds ``stack.pkr.hcl`` (a link to ``images/common/stack.pkr.hcl``),
``variables.pkr.hcl``, ``candidate.pkr.hcl`` and ``plugins.pkr.hcl`` (the
``packer { required_plugins }`` block current Packer needs). Packer 1.6.6 has the
builders built in and fails on that block ("Unsupported block type"), so for it the
folder is copied without ``plugins.pkr.hcl`` (the copy holds the linked file's content).
Packer loads every ``*.pkr.hcl`` of a folder, so no file list is needed either way.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from imagectl.errors import UserError
from imagectl.packer.binary import PackerBinary

PLUGINS_FILE = "plugins.pkr.hcl"


def template_files(source: Path) -> list[Path]:
    files = sorted(source.glob("*.pkr.hcl"))
    if not files:
        raise UserError(
            f"no Packer templates (*.pkr.hcl) in {source}",
            hint="Every cloud folder under images/ needs variables.pkr.hcl and candidate.pkr.hcl",
        )
    return files


def stage_templates(source: Path, dest: Path, binary: PackerBinary) -> Path:
    """The folder to hand to packer: ``source`` itself, or a copy for Packer < 1.7."""
    files = template_files(source)
    if binary.supports_plugin_blocks:
        return source
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.pkr.hcl"):
        old.unlink()
    for f in files:
        if f.name != PLUGINS_FILE:
            shutil.copy2(f, dest / f.name)  # follows the link to images/common/
    return dest
