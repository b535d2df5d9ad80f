"""Package discovery for the folder -> import-name mapping in pyproject.toml.

pipeline/ is imported as ``imagectl``, validators/ as ``imagectl.validators`` and the data
folder images/ as ``imagectl.images``. setuptools' own discovery cannot rename folders, so
the package list is computed here from the tree: a new sub-package needs no edit.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {"imagectl": "pipeline", "imagectl.validators": "validators"}


def _packages() -> list[str]:
    found = ["imagectl.images"]
    for name, folder in ROOTS.items():
        base = Path(folder)
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            found.append(".".join([name, *rel.parts]) if rel.parts else name)
    return found


setup(packages=_packages())
