"""Resolve requirements to exact wheels for each target Python, with pip's own resolver.

``pip install --dry-run --report`` picks the versions and names each wheel with its
sha256 (the index's hash; hashed here for a file:// index that gives none). pip judges
wheel tags and Requires-Python for the target, but evaluates environment markers for the
Python it runs on (``pytest``'s ``exceptiongroup; python_version < "3.11"`` would be left
out for 3.10 by a 3.11 controller), so the closure is walked again here from each
distribution's Requires-Dist with the target's markers: what is missing is added as a
root and resolved again; what the target does not need is dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypedDict
from urllib.parse import unquote, urlparse

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from imagectl.core.errors import UserError
from imagectl.redact import scrub

PYPI = "https://pypi.org/simple"


def target_environment(python: str) -> dict[str, str]:
    """PEP 508 marker values of a CPython ``python`` on x86_64 Linux."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "platform_python_implementation": "CPython",
        "platform_machine": "x86_64",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "extra": "",
    }


def isolated_pip_env() -> dict[str, str]:
    """pip without this machine's configuration (find-links, constraints, extra
    indexes): a lock depends only on the index it names."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


class _ArchiveInfo(TypedDict, total=False):
    hashes: dict[str, str]


class _Download(TypedDict):
    url: str


class _DownloadInfo(_Download, total=False):
    archive_info: _ArchiveInfo


class _Named(TypedDict):
    name: str
    version: str


class _Metadata(_Named, total=False):
    requires_dist: list[str]


class ReportItem(TypedDict):
    """One entry of pip's installation report's ``install`` list (pip documentation,
    "Installation Report", version 1): the fields read here."""

    download_info: _DownloadInfo
    metadata: _Metadata


def _hint(stderr: str) -> str:
    # what a pip older than 23.3 says to --dry-run with --platform (pip's cmdoptions.py,
    # check_dist_restriction); 23.3 added "or using '--dry-run'" and lets it through
    if "Can not use any platform or abi specific options" in stderr and "--dry-run" not in stderr:
        return (
            f"This pip ({sys.executable} -m pip) predates 23.3, the first that resolves "
            "for another platform with --dry-run; install validators/installer.lock's pip "
            "into this environment (`make venv` does) and run again"
        )
    return "The lock is made from the package index; check the index and ranges"


def pip_report(
    roots: Iterable[str], *, python: str, platforms: Iterable[str], index_url: str
) -> list[ReportItem]:
    with tempfile.TemporaryDirectory(prefix="imagectl-lock-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--report", str(report), "--only-binary=:all:",
            "--python-version", python, "--implementation", "cp",
            *[arg for p in platforms for arg in ("--platform", p)], "--platform", "any",
            *roots,
        ]  # fmt: skip
        # the index (and any credentials in it) through the environment: never on argv,
        # which every user can read in /proc
        env = {**isolated_pip_env(), "PIP_INDEX_URL": index_url}
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if proc.returncode != 0:
            raise UserError(
                f"resolving {' '.join(roots)} for Python {python} failed: "
                f"{scrub(proc.stderr.strip()[-600:], index_url)}",
                hint=_hint(proc.stderr),
            )
        items: list[ReportItem] = json.loads(report.read_text())["install"]
        return items


def _sha256(item: ReportItem) -> str:
    info = item["download_info"]
    hashes = info.get("archive_info", {}).get("hashes", {})
    if "sha256" in hashes:
        return str(hashes["sha256"])
    url = urlparse(info["url"])
    if url.scheme == "file":
        return hashlib.sha256(Path(unquote(url.path)).read_bytes()).hexdigest()
    raise UserError(f"the index gave no sha256 for {info['url']}")


def _closure(
    roots: Iterable[str], items: Mapping[str, ReportItem], env: Mapping[str, str]
) -> tuple[set[str], list[str]]:
    """(names the target needs that pip resolved, requirements it needs that pip left out)."""
    needed: set[str] = set()
    missing: list[str] = []
    seen: set[tuple[str, str]] = set()
    todo = [Requirement(r) for r in roots]
    while todo:
        req = todo.pop()
        extras = sorted(req.extras) or [""]
        if req.marker is not None and not req.marker.evaluate(dict(env)):
            continue
        name = canonicalize_name(req.name)
        item = items.get(name)
        if item is None:
            missing.append(str(Requirement(f"{req.name}{req.specifier}")))
            continue
        needed.add(name)
        for extra in extras:
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            for dep in item["metadata"].get("requires_dist", []) or []:
                dreq = Requirement(dep)
                if dreq.marker is None or dreq.marker.evaluate({**env, "extra": extra}):
                    dreq.marker = None
                    todo.append(dreq)
    return needed, missing


def resolve(
    requirements: Iterable[str], *, python: str, platforms: Iterable[str], index_url: str
) -> dict[str, tuple[str, str]]:
    """{canonical name: (version, sha256)} of every wheel ``python`` needs."""
    roots = list(requirements)
    env = target_environment(python)
    for _ in range(8):
        report = pip_report(roots, python=python, platforms=platforms, index_url=index_url)
        items: dict[str, ReportItem] = {
            str(canonicalize_name(i["metadata"]["name"])): i for i in report
        }
        needed, missing = _closure(requirements, items, env)
        if not missing:
            return {n: (str(items[n]["metadata"]["version"]), _sha256(items[n])) for n in needed}
        roots += [m for m in missing if m not in roots]
    raise UserError(f"resolving for Python {python} did not settle: still missing {missing}")
