"""Stage a cloud's template folder for the packer binary at hand.

``images/<cloud>/`` holds ``variables.pkr.hcl`` (the cloud's own variables),
``candidate.pkr.hcl`` and ``plugins.pkr.hcl`` (the ``packer { required_plugins }``
block current Packer needs). ``images/common/`` holds what every cloud shares
(``stack.pkr.hcl``: the variables fed from a stack), kept once.

Packer loads every ``*.pkr.hcl`` of one folder, so a build runs in a staged folder:
the cloud's files plus the common ones. Packer 1.6.6 has the builders built in and
fails on the plugins block ("Unsupported block type"), so for it ``plugins.pkr.hcl``
is left out of the staged folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from imagectl.errors import UserError
from imagectl.packer.binary import PackerBinary

PLUGINS_FILE = "plugins.pkr.hcl"
COMMON = "common"  # images/common/: the template files every cloud shares


def common_dir(source: Path) -> Path:
    return source.parent / COMMON


def template_files(source: Path) -> list[Path]:
    """The cloud folder's templates, then the common ones; UserError on none or a clash."""
    own = sorted(source.glob("*.pkr.hcl"))
    if not own:
        raise UserError(
            f"no Packer templates (*.pkr.hcl) in {source}",
            hint="Every cloud folder under images/ needs variables.pkr.hcl and candidate.pkr.hcl",
        )
    shared = sorted(common_dir(source).glob("*.pkr.hcl"))
    clash = sorted({f.name for f in own} & {f.name for f in shared})
    if clash:
        raise UserError(
            f"{source} and {common_dir(source)} both hold {', '.join(clash)}",
            hint="Keep a shared template only in images/common/, or rename the cloud's own file",
        )
    return own + shared


def stage_templates(source: Path, dest: Path, binary: PackerBinary) -> Path:
    """Copy the cloud's and the common templates into ``dest`` (the folder for packer)."""
    files = template_files(source)
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.pkr.hcl"):
        old.unlink()
    for f in files:
        if f.name != PLUGINS_FILE or binary.supports_plugin_blocks:
            shutil.copy2(f, dest / f.name)
    return dest
