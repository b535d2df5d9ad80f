"""The folders a ``.pth`` file adds to this interpreter, checked each time imagectl starts.

Python's ``site`` module reads every ``*.pth`` file of a site-packages folder at start:
a line naming a folder appends it to ``sys.path``, and a line starting with ``import``
runs (the toolkit venv's ``imagectl-validator.pth`` runs ``site.addsitedir(FOLDER)``,
which reads that folder's ``.pth`` files in turn). ``install.sh --host-site-packages``
writes the host's site-packages folders into the bundle venv's
``imagectl-host-site-packages.pth``. Every module in those folders is imported as the
validator's own, by runs as root, so each decides trust: ``refused()`` checks, with
``imagectl.core.trustpath.refusal`` (the one check), every ``.pth`` file of this venv's
site-packages and of every folder one adds, and every folder a ``.pth`` line names or
``site.addsitedir`` adds. The CLI runs it before any command, so a folder made writable
by others after the install (or a ``.pth`` added later) is refused at the run that would
import from it, not only at install.

Only a venv's own site-packages are read (``sys.prefix`` differs from
``sys.base_prefix``): a system interpreter's folders are the distribution's. A module a
planted folder names ``sitecustomize`` runs while Python starts, before any check can
(``install.sh`` refuses such a folder before writing it).
"""

from __future__ import annotations

import ast
import os
import re
import site
import sys

from imagectl.core.trustpath import refusal

ADDSITEDIR = re.compile(r"site\.addsitedir\(([^()]*)\)")


def _venv_sites() -> list[str]:
    if sys.prefix == sys.base_prefix:
        return []
    prefix = os.path.realpath(sys.prefix)
    return [p for p in site.getsitepackages() if os.path.realpath(p).startswith(prefix + os.sep)]


def _added(site_dir: str, line: str) -> tuple[list[str], list[str]]:
    """(folders the line appends to sys.path, folders it adds as site folders), as
    ``site.addpackage`` reads a ``.pth`` line."""
    if not line or line.startswith("#"):
        return [], []
    if line.startswith(("import ", "import\t")):
        sites = []
        for arg in ADDSITEDIR.findall(line):
            try:
                value = ast.literal_eval(arg.strip())
            except (ValueError, SyntaxError):
                continue  # not a literal: nothing to name before it runs
            if isinstance(value, str):
                sites.append(value)
        return [], sites
    return [os.path.join(site_dir, line)], []


def refused(site_dirs: list[str] | None = None) -> str | None:
    """Why a ``.pth`` file of ``site_dirs`` (default: this venv's site-packages), or a
    folder one adds, cannot be trusted (the first found); None when each can."""
    todo = list(_venv_sites() if site_dirs is None else site_dirs)
    seen: set[str] = set()
    while todo:
        site_dir = todo.pop(0)
        if site_dir in seen or not os.path.isdir(site_dir):
            continue
        seen.add(site_dir)
        try:
            names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            pth = os.path.join(site_dir, name)
            why = refusal(pth, ".pth file (Python runs or follows it at every start)")
            if why is not None:
                return why
            try:
                with open(pth, encoding="utf-8", errors="replace") as fh:
                    lines = [line.rstrip() for line in fh]
            except OSError:
                continue
            for line in lines:
                folders, sites = _added(site_dir, line)
                for folder in folders + sites:
                    if not os.path.exists(folder):
                        continue  # site adds only folders that exist
                    why = refusal(folder, f"folder that {name} adds to sys.path")
                    if why is not None:
                        return why
                todo += sites
    return None
