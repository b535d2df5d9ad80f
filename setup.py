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
    # Data folders: sub-folders with importable names are listed, as setuptools expects
    # for package data; files in the others (e.g. etc/apt/apt.conf.d) ship through the
    # recursive package-data globs of the nearest listed folder.
    for name, folder in DATA_ROOTS.items():
        base = Path(folder)
        found.append(name)
        subs = [p for p in base.rglob("*") if p.is_dir() and "__pycache__" not in p.parts]
        for sub in sorted(subs):
            parts = sub.relative_to(base).parts
            if all(part.isidentifier() for part in parts):
                found.append(".".join([name, *parts]))
    for name, folder in ROOTS.items():
        base = Path(folder)
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            found.append(".".join([name, *rel.parts]) if rel.parts else name)
    return found


setup(packages=_packages())
