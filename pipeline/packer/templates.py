"""Stage a cloud's template folder for the packer binary at hand.

``images/<cloud>/`` holds ``variables.pkr.hcl`` (the cloud's own variables),
``candidate.pkr.hcl`` (its ``source`` block) and ``plugins.pkr.hcl`` (the
``packer { required_plugins }`` block current Packer needs). ``images/common/`` holds
what every cloud shares, kept once: ``stack.pkr.hcl`` (the variables fed from a stack
and the cloud's spec) and ``build.pkr.hcl.tmpl`` (the one ``build {}`` block, staged as
``build.pkr.hcl`` with the cloud's source written in: ``render_build``).

Packer loads every ``*.pkr.hcl`` of one folder, so a build runs in a staged folder:
the cloud's files plus the common ones. Packer 1.6.6 has the builders built in and
fails on the plugins block ("Unsupported block type"), so for it ``plugins.pkr.hcl``
is left out of the staged folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from imagectl.clouds.registry import cloud_spec, specs
from imagectl.core.errors import UserError
from imagectl.packer.binary import PackerBinary
from imagectl.paths import bundled_images

PLUGINS_FILE = "plugins.pkr.hcl"
COMMON = "common"  # images/common/: the template files every cloud shares
BUILD_TEMPLATE = "build.pkr.hcl.tmpl"
SOURCE_MARK = "@SOURCE@"
PLUGIN_ONLY_BEGIN = "# plugins-only: begin"
PLUGIN_ONLY_END = "# plugins-only: end"


def common_dir(source: Path) -> Path:
    """The shared templates beside the cloud's folder (``images/common/``); for a cloud
    whose templates live elsewhere (``CloudSpec.templates``), imagectl's own."""
    beside = source.parent / COMMON
    return beside if beside.is_dir() else bundled_images() / COMMON


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
        if binary.supports_plugin_blocks:
            shutil.copy2(f, dest / f.name)
        elif f.name != PLUGINS_FILE:
            (dest / f.name).write_text(
                without_plugin_only(f.read_text(encoding="utf-8")), encoding="utf-8"
            )
    (dest / "build.pkr.hcl").write_text(render_build(source), encoding="utf-8")
    return dest


def without_plugin_only(text: str) -> str:
    """``text`` without its plugin-only lines: settings the current plugins take and
    Packer 1.6.6's built-in builders refuse ("Unsupported argument"), written between a
    ``# plugins-only: begin`` and a ``# plugins-only: end`` line (the amazon plugin's
    ``imds_support`` and ``metadata_options``; azure's destination ``storage_account_type``).
    With 1.6.6 the build runs without them (images/README.md says what that leaves out)."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        mark = line.strip()
        if mark == PLUGIN_ONLY_BEGIN:
            skipping = True
        elif mark == PLUGIN_ONLY_END:
            skipping = False
        elif not skipping:
            out.append(line)
    return "".join(out)


def render_build(source: Path) -> str:
    """The shared build block for the cloud of ``source`` (``images/<cloud>``, or the
    folder its spec names in ``templates``): its source is ``<the spec's Packer
    builder>.candidate``, which its candidate.pkr.hcl must declare."""
    spec = next((s for s in specs().values() if s.templates == source), None)
    spec = spec or cloud_spec(source.name)
    template = common_dir(source) / BUILD_TEMPLATE
    if not template.is_file():
        raise UserError(
            f"{template} is missing",
            hint="images/common/ holds the build block every cloud shares; restore it from git",
        )
    declared = f'source "{spec.packer_builder}" "candidate"'
    if not any(declared in f.read_text(encoding="utf-8") for f in source.glob("*.pkr.hcl")):
        raise UserError(
            f"{source} declares no {declared} block",
            hint=f"The {spec.name} cloud builds with Packer's {spec.packer_builder} builder "
            f"(pipeline/clouds/{spec.name}/spec.py); name its source 'candidate'",
        )
    return template.read_text(encoding="utf-8").replace(
        SOURCE_MARK, f"{spec.packer_builder}.candidate"
    )
