"""Upstream drift of a GPU stack against NVIDIA's CUDA apt repository.

Rules (each a finding ``kind``):

- ``driver-newer``: a newer release within the pinned driver branch. When the stack
  needs the fabric manager, only a driver whose ``nvidia-fabricmanager`` build of the
  exact same version is published counts (``fabric-manager-newer`` moves with it);
  a newer driver without its fabric manager is ``driver-without-fabric-manager`` (info).
- ``nccl-newer``: a newer ``libnccl2`` built for the toolkit's CUDA major (never another
  major); among builds of that release, the one for the toolkit's minor, else the
  highest minor below it.
- ``cuda-newer``: a newer patch release of the pinned ``cuda-toolkit-<major>-<minor>``.
- ``dcgm-newer``: a newer ``datacenter-gpu-manager-4-cuda<major>``.
- ``branch-eol`` / ``branch-eol-soon``: the driver branch is past end of life, or within
  ``warn_days`` (images/compat/branches.yaml) of it, as of ``as_of``.

Each newer release becomes a ``PinChange``; ``proposals.check`` runs them through the
compatibility engine before any is written.
"""

from __future__ import annotations

import datetime as dt
import re

from imagectl.compat.data import CompatData
from imagectl.core.versions import Dotted, NcclVersion, debian_version_key, upstream_version
from imagectl.drift.findings import Finding, PinChange, StackDrift
from imagectl.drift.indexes import PackageIndex, load_index
from imagectl.drift.sources import nvidia_repo_folder
from imagectl.stacks.resolve import ResolvedStack

_DRIVER_PKG = re.compile(r"^(?:nvidia-driver|nvidia-open|cuda-drivers)-(\d+)(?:-server|-open)?$")
_PINNING_PKG = re.compile(r"^nvidia-driver-pinning-(\d+\.\d+(?:\.\d+)?)$")
_FM_PKG = re.compile(r"^nvidia-fabricmanager(?:-(\d+))?$")
_WANTED = re.compile(r"^(nvidia-|cuda-|libnccl2$|datacenter-gpu-manager-)")


def wanted(name: str) -> bool:
    return bool(_WANTED.match(name))


def _dotted(text: str) -> Dotted | None:
    try:
        return Dotted.parse(text)
    except Exception:
        return None


def driver_versions(index: PackageIndex, branch: int) -> set[Dotted]:
    out: set[Dotted] = set()
    for name, entries in index.packages.items():
        m = _DRIVER_PKG.match(name)
        if m and int(m[1]) == branch:
            out.update(v for e in entries if (v := _dotted(upstream_version(e.version))))
        p = _PINNING_PKG.match(name)
        if p and (v := _dotted(p[1])) and v.major == branch:
            out.add(v)
    return out


def fabric_manager_versions(index: PackageIndex, branch: int) -> set[Dotted]:
    out: set[Dotted] = set()
    for name, entries in index.packages.items():
        m = _FM_PKG.match(name)
        if not m or (m[1] is not None and int(m[1]) != branch):
            continue
        out.update(
            v for e in entries if (v := _dotted(upstream_version(e.version))) and v.major == branch
        )
    return out


def check_stack(
    resolved: ResolvedStack,
    data: CompatData,
    drift: StackDrift,
    *,
    as_of: dt.date,
    repo_url: str | None = None,
) -> None:
    stack = resolved.stack
    n = stack.nvidia
    assert n is not None
    folder = nvidia_repo_folder(stack, repo_url)
    index = load_index([folder], wanted)
    drift.checked.append({"index": index.urls, "from_cache": index.from_cache})
    name = stack.name

    def finding(
        kind: str,
        subject: str,
        current: str | None,
        available: str | None,
        detail: str,
        severity: str = "drift",
    ) -> None:
        drift.findings.append(
            Finding("upstream", name, kind, subject, current, available, detail, severity)
        )

    # -- driver and fabric manager ---------------------------------------------------
    current = Dotted.parse(n.driver.version)
    branch = current.major
    drivers = driver_versions(index, branch)
    newer = sorted(v for v in drivers if v > current)
    drift.checked.append(
        {
            "subject": "driver",
            "pinned": n.driver.version,
            "latest": str(max(drivers)) if drivers else None,
        }
    )
    if resolved.fabric_manager is not None:
        fms = fabric_manager_versions(index, branch)
        usable = [v for v in newer if v in fms]
        for v in newer:
            if v not in fms and (not usable or v > usable[-1]):
                finding(
                    "driver-without-fabric-manager",
                    f"nvidia-driver R{branch}",
                    n.driver.version,
                    v.text,
                    f"driver {v} is published but nvidia-fabricmanager {v} is not yet; "
                    "the fabric manager must equal the driver, so it is not proposed",
                    severity="info",
                )
    else:
        usable = newer
    if usable:
        target = usable[-1].text
        others = ", ".join(v.text for v in usable[:-1])
        finding(
            "driver-newer",
            f"driver R{branch}",
            n.driver.version,
            target,
            f"newer release in the pinned branch R{branch}"
            + (f" (also: {others})" if others else ""),
        )
        if resolved.fabric_manager is not None:
            finding(
                "fabric-manager-newer",
                "nvidia-fabricmanager",
                resolved.fabric_manager,
                target,
                "moves with the driver (fabric manager == driver, exactly)",
            )
        drift.proposals.append(
            PinChange(
                ("nvidia", "driver", "version"),
                n.driver.version,
                target,
                f"newer R{branch} release",
            )
        )

    # -- CUDA toolkit patch release -------------------------------------------------
    cuda = Dotted.parse(n.cuda)
    pkg = resolved.cuda_package  # images/compat/packages.yaml: cuda_toolkit
    assert pkg is not None  # every GPU stack pins CUDA
    cudas = sorted({c for ver in index.versions(pkg) if (c := _dotted(upstream_version(ver)))})
    drift.checked.append(
        {"subject": pkg, "pinned": n.cuda, "latest": cudas[-1].text if cudas else None}
    )
    if cudas and cudas[-1] > cuda:
        target = cudas[-1].text
        finding(
            "cuda-newer", pkg, n.cuda, target, f"newer CUDA {cuda.major}.{cuda.minor} patch release"
        )
        drift.proposals.append(
            PinChange(("nvidia", "cuda"), n.cuda, target, f"newer {pkg} patch release")
        )

    # -- NCCL -----------------------------------------------------------------------
    if n.nccl:
        pinned = NcclVersion.parse(n.nccl)
        best = best_nccl(index.versions("libnccl2"), cuda)
        drift.checked.append(
            {"subject": "libnccl2", "pinned": n.nccl, "latest": best.text if best else None}
        )
        if best and (best.version, best.revision) > (pinned.version, pinned.revision):
            finding(
                "nccl-newer",
                "libnccl2",
                n.nccl,
                best.text,
                f"newer NCCL built for CUDA {cuda.major}",
            )
            drift.proposals.append(
                PinChange(
                    ("nvidia", "nccl"), n.nccl, best.text, f"newer NCCL for CUDA {cuda.major}"
                )
            )

    # -- DCGM -----------------------------------------------------------------------
    if n.dcgm and resolved.dcgm_package:
        versions = sorted(index.versions(resolved.dcgm_package), key=debian_version_key)
        drift.checked.append(
            {
                "subject": resolved.dcgm_package,
                "pinned": n.dcgm,
                "latest": versions[-1] if versions else None,
            }
        )
        if versions and debian_version_key(versions[-1]) > debian_version_key(n.dcgm):
            finding(
                "dcgm-newer",
                resolved.dcgm_package,
                n.dcgm,
                versions[-1],
                "newer DCGM for this CUDA major",
            )
            drift.proposals.append(
                PinChange(
                    ("nvidia", "dcgm"), n.dcgm, versions[-1], f"newer {resolved.dcgm_package}"
                )
            )

    # -- branch lifecycle -----------------------------------------------------------
    info = data.branches.get(branch)
    if info is None:
        finding(
            "branch-unknown",
            f"driver R{branch}",
            n.driver.version,
            None,
            "the branch is not in images/compat/branches.yaml: its end of life is unknown",
            severity="info",
        )
    else:
        days = (info.end_of_life - as_of).days
        if days < 0 or days <= data.branch_warn_days:
            hint = _successor_hint(index, data, branch, as_of)
            if days < 0:
                finding(
                    "branch-eol",
                    f"driver R{branch} ({info.designation})",
                    n.driver.version,
                    None,
                    f"end of life on {info.end_of_life}, {-days} days ago; {hint}",
                )
            else:
                finding(
                    "branch-eol-soon",
                    f"driver R{branch} ({info.designation})",
                    n.driver.version,
                    None,
                    f"end of life on {info.end_of_life}, in {days} days; {hint}",
                    severity="warning",
                )


def best_nccl(versions: list[str], cuda: Dotted) -> NcclVersion | None:
    """The newest libnccl2 for the toolkit's CUDA major, built for minor <= the toolkit's."""
    candidates = []
    for text in versions:
        try:
            v = NcclVersion.parse(text)
        except Exception:
            continue
        if v.cuda.major == cuda.major and v.cuda.minor <= cuda.minor:
            candidates.append(v)
    if not candidates:
        return None
    return max(candidates, key=lambda v: (v.version, v.revision, v.cuda))


def _successor_hint(index: PackageIndex, data: CompatData, branch: int, as_of: dt.date) -> str:
    """Name the newest supported long-term branch the repository offers, if any."""
    offered = set()
    for name in index.packages:
        m = _DRIVER_PKG.match(name)
        if m:
            offered.add(int(m[1]))
    good = [
        b
        for b in sorted(offered)
        if b > branch
        and (info := data.branches.get(b)) is not None
        and info.designation == "LTSB"
        and info.end_of_life > as_of
    ]
    if good:
        return f"move to R{good[-1]} (LTSB, offered by the repository) and re-validate"
    return "move to a supported branch and re-validate"
