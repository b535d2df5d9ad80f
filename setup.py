"""Package discovery for the folder -> import-name mapping in pyproject.toml.

pipeline/ is imported as ``imagectl``, validators/ as ``imagectl.validators``, and the data
folders images/ and playbooks/ ship as ``imagectl.images`` and ``imagectl.playbooks`` (so a
wheel install can lint, plan and build without a checkout). setuptools' own discovery
cannot rename folders, so the package list is computed here from the tree: a new
sub-package needs no edit.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {"imagectl": "pipeline", "imagectl.validators": "validators"}
DATA_ROOTS = {"imagectl.images": "images", "imagectl.playbooks": "playbooks"}


def _packages() -> list[str]:
    found = []
    # Data folders: every sub-folder is listed, as setuptools expects for package data.
    for name, folder in DATA_ROOTS.items():
        base = Path(folder)
        found.append(name)
        for sub in sorted(
            p
            for p in base.rglob("*")
            if p.is_dir()
            and "__pycache__" not in p.parts
            # apt.conf.d, preferences.d: not package names; their files ship through
            # the "**/*" package-data glob of the nearest folder above.
            and not any("." in part for part in p.relative_to(base).parts)
        ):
            found.append(".".join([name, *sub.relative_to(base).parts]))
    for name, folder in ROOTS.items():
        base = Path(folder)
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            found.append(".".join([name, *rel.parts]) if rel.parts else name)
    return found


setup(packages=_packages())
