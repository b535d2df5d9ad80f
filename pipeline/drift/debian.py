"""Upstream drift of the ``local`` (Debian) stack against Debian's own archive.

The stack pins the kernel (``clouds.local.kernel``, package ``linux-image-<kernel>``)
and exact package versions (``clouds.local.packages``). Against the main, -updates and
-security indexes of its release:

- ``kernel-newer``: the flavour's metapackage (``linux-image-cloud-amd64``) depends on a
  newer kernel ABI than the pinned one;
- ``package-newer``: a newer version of a pinned package is offered;
- ``pin-unavailable``: the pinned version is no longer offered at all (the next build
  would fail to install it).
"""

from __future__ import annotations

import re

from imagectl.clouds.local.stack import SECTION as LOCAL_SECTION
from imagectl.clouds.local.stack import LocalCloud
from imagectl.core.versions import debian_version_key
from imagectl.drift.findings import Finding, PinChange, StackDrift
from imagectl.drift.indexes import load_index
from imagectl.drift.sources import debian_folders
from imagectl.stacks.schema import Stack

_KERNEL = re.compile(r"^(?P<abi>\d+\.\d+\.\d+-\d+)-(?P<flavour>[a-z0-9-]+)$")


def kernel_key(release: str) -> tuple[int, ...]:
    """``6.1.0-56-cloud-amd64`` -> (6, 1, 0, 56)."""
    m = _KERNEL.match(release)
    if not m:
        return ()
    return tuple(int(p) for p in re.split(r"[.-]", m["abi"]))


def check_stack(stack: Stack, drift: StackDrift) -> None:
    local = stack.clouds.section_of(LocalCloud)
    assert local is not None
    m = _KERNEL.match(local.kernel)
    flavour = m["flavour"] if m else ""
    meta = f"linux-image-{flavour}"
    pinned_kernel_pkg = f"linux-image-{local.kernel}"
    names = {meta, pinned_kernel_pkg, *local.packages}
    index = load_index(debian_folders(stack, local.mirror), lambda n: n in names)
    drift.checked.append({"index": index.urls, "from_cache": index.from_cache})

    def finding(
        kind: str,
        subject: str,
        current: str,
        available: str | None,
        detail: str,
        severity: str = "drift",
    ) -> None:
        drift.findings.append(
            Finding("upstream", stack.name, kind, subject, current, available, detail, severity)
        )

    # -- kernel ---------------------------------------------------------------------
    metas = sorted(index.entries(meta), key=lambda e: debian_version_key(e.version))
    latest_kernel = None
    if metas:
        dep = re.search(
            rf"linux-image-(\d+\.\d+\.\d+-\d+-{re.escape(flavour)})\b", metas[-1].depends
        )
        latest_kernel = dep[1] if dep else None
    drift.checked.append(
        {
            "subject": "kernel",
            "package": meta,
            "pinned": local.kernel,
            "latest": latest_kernel,
            "pinned_offered": bool(index.versions(pinned_kernel_pkg)),
        }
    )
    if latest_kernel and kernel_key(latest_kernel) > kernel_key(local.kernel):
        finding(
            "kernel-newer",
            "kernel",
            local.kernel,
            latest_kernel,
            f"{meta} {metas[-1].version} depends on linux-image-{latest_kernel}",
        )
        drift.proposals.append(
            PinChange(
                ("clouds", LOCAL_SECTION.name, "kernel"),
                local.kernel,
                latest_kernel,
                f"newer {meta} kernel ABI",
            )
        )
    if not index.versions(pinned_kernel_pkg):
        finding(
            "pin-unavailable",
            pinned_kernel_pkg,
            local.kernel,
            latest_kernel,
            "the pinned kernel package is no longer in the archive: the next build fails",
        )

    # -- pinned packages ------------------------------------------------------------
    for name, pinned in local.packages.items():
        versions = sorted(index.versions(name), key=debian_version_key)
        latest = versions[-1] if versions else None
        drift.checked.append(
            {
                "subject": name,
                "pinned": pinned,
                "latest": latest,
                "pinned_offered": pinned in versions,
            }
        )
        if latest and debian_version_key(latest) > debian_version_key(pinned):
            finding(
                "package-newer",
                name,
                pinned,
                latest,
                "newer version in the archive (security or point release)",
            )
            drift.proposals.append(
                PinChange(
                    ("clouds", LOCAL_SECTION.name, "packages", name),
                    pinned,
                    latest,
                    f"newer {name} in the archive",
                )
            )
        if pinned not in versions:
            finding(
                "pin-unavailable",
                name,
                pinned,
                latest,
                "the pinned version is no longer in the archive: the next build fails",
            )
