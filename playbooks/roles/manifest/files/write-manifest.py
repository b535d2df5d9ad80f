#!/usr/bin/env python3
"""Print the image manifest (JSON) from ground truth: dpkg, apt holds, modinfo, NCCL.

Standard library only: it runs on the image, before imagectl's own venv exists.
"""

import argparse
import ctypes
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the role installs it beside
from manifest_io import emit, run


def installed_packages(patterns):
    """name -> version of every installed package matching a dpkg-query pattern."""
    # dpkg-query exits 1 when one pattern matches nothing and still prints the rest.
    _, out = run(
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev}\t${Package}\t${Version}\n", *patterns]
    )
    packages = {}
    for line in out.splitlines():
        parts = line.split("\t")
        # Status-Abbrev: want flag (i install, h hold) then state (i installed).
        if len(parts) == 3 and parts[0][1:2] == "i":
            packages[parts[1]] = parts[2]
    return dict(sorted(packages.items()))


def held_packages():
    _, out = run(["dpkg-query", "-W", "-f=${Package}\t${Status}\n"])
    held = [
        line.split("\t")[0]
        for line in out.splitlines()
        if "\t" in line and line.split("\t")[1].startswith("hold ")
    ]
    return sorted(held)


def module_flavour(kernel):
    """open / proprietary from nvidia.ko's license for the pinned kernel, or None."""
    code, out = run(["modinfo", "-k", kernel, "-F", "license", "nvidia"])
    if code != 0 or not out.strip():
        return None
    return "open" if "GPL" in out else "proprietary"


def driver_module_version(kernel):
    """nvidia.ko's own version for the pinned kernel (modinfo), e.g. 580.95.05, or None."""
    code, out = run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])
    return (out.strip() or None) if code == 0 else None


def component_versions(components, packages):
    """component -> the installed Debian version of its first package (from dpkg)."""
    return {name: packages.get(package) for name, package in sorted(components.items())}


def nccl_version():
    """ncclGetVersion() of the installed libnccl.so.2: 22602 -> 2.26.2."""
    try:
        lib = ctypes.CDLL("libnccl.so.2")
    except OSError:
        return None
    code = ctypes.c_int(0)
    if lib.ncclGetVersion(ctypes.byref(code)) != 0:
        return None
    v = code.value
    major, minor, patch = (
        (v // 10000, (v % 10000) // 100, v % 100)
        if v >= 10000
        else (v // 1000, (v % 1000) // 100, v % 100)
    )
    return f"{major}.{minor}.{patch}"


def validator_toolkit(venv):
    """torch's release and CUDA variant in the validator venv (its files, no import)."""
    for meta in sorted(
        glob.glob(
            os.path.join(venv, "lib", "python3*", "site-packages", "torch-*.dist-info", "METADATA")
        )
    ):
        version = None
        with open(meta, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
                    break
        site = os.path.dirname(os.path.dirname(meta))
        cuda = None
        try:
            with open(os.path.join(site, "torch", "version.py"), encoding="utf-8") as fh:
                match = re.search(r"^cuda\s*(?::[^=]*)?=\s*'([^']*)'", fh.read(), re.M)
                cuda = match.group(1) if match else None
        except OSError:
            pass
        return {"torch": version, "cuda": cuda}
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", required=True)
    ap.add_argument("--digest", required=True)
    ap.add_argument("--cloud", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--pattern", action="append", default=[])
    ap.add_argument(
        "--component",
        action="append",
        default=[],
        help="NAME=PACKAGE: the stack component and the package that carries it",
    )
    ap.add_argument("--validator-venv", default="/opt/imagectl")
    # unique to the build: two builds of one stack never write the same manifest, so an
    # attestation of one (it names the manifest's sha256) never holds on the other
    ap.add_argument("--build-id", default="")
    ap.add_argument("--nonce", default="")
    # the base image the build started from (the cloud's id for it): known ancestry
    ap.add_argument("--base-image-id", default="")
    ap.add_argument("--base-image-name", default="")
    ap.add_argument("--base-image-source", default="")
    ap.add_argument("--output", default="", help="write the JSON here (default: stdout)")
    args = ap.parse_args()
    components = dict(c.split("=", 1) for c in args.component)
    packages = installed_packages(sorted(set(args.pattern) | set(components.values())))
    versions = component_versions(components, packages)
    manifest = {
        "schema_version": 2,
        "build_id": args.build_id or None,
        "nonce": args.nonce or None,
        "stack": args.stack,
        "stack_digest": args.digest,
        "cloud": args.cloud,
        "kernel": args.kernel,
        "base_image": (
            {
                "cloud": args.cloud,
                "id": args.base_image_id,
                "name": args.base_image_name or None,
                "source": args.base_image_source or None,
            }
            if args.base_image_id
            else None
        ),
        "packages": packages,
        "held": held_packages(),
        "kernel_modules": module_flavour(args.kernel),
        # The stack's components as fields (imagectl.validators.manifest.ImageManifest):
        # the driver as its kernel module reports it, the others as dpkg installed them.
        "driver": driver_module_version(args.kernel) or versions.get("driver"),
        "fabric_manager": versions.get("fabric_manager"),
        "cuda": versions.get("cuda_toolkit"),
        "dcgm": versions.get("dcgm"),
        "container_toolkit": versions.get("container_toolkit"),
        "nccl": nccl_version() or versions.get("nccl"),
        "validator_toolkit": validator_toolkit(args.validator_venv),
    }
    emit(manifest, args.output)


if __name__ == "__main__":
    main()
