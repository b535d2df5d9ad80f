#!/usr/bin/env python3
"""Print the image's full inventory (JSON) from ground truth, for its SBOM.

Every installed dpkg package (name, version, source package and version, architecture),
the validator venv's Python distributions (their dist-info METADATA, no import), and the
pinned kernel with its NVIDIA kernel modules (modinfo: version, vermagic, srcversion).
imagectl turns it into a CycloneDX SBOM on the controller (imagectl.provenance.sbom).

Standard library only: it runs on the image (Ubuntu 22.04's Python 3.10 and newer).
"""

import argparse
import glob
import json
import os
import subprocess

DPKG_FORMAT = (
    "${db:Status-Abbrev}\t${Package}\t${Version}\t${source:Package}\t${source:Version}"
    "\t${Architecture}\n"
)
NVIDIA_MODULES = (
    "nvidia",
    "nvidia_uvm",
    "nvidia_drm",
    "nvidia_modeset",
    "nvidia_peermem",
    "nvidia_fs",
    "gdrdrv",
)
MODINFO_FIELDS = ("version", "vermagic", "srcversion", "license", "filename")


def run(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:  # no kmod: no modules to list
        return 127, ""
    return proc.returncode, proc.stdout


def dpkg_packages():
    code, out = run(["dpkg-query", "-W", "-f=" + DPKG_FORMAT])
    if code != 0:
        raise SystemExit("dpkg-query failed: no package database")
    packages = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) != 6 or parts[0][1:2] != "i":  # installed ("ii", "hi")
            continue
        _status, name, version, source, source_version, arch = parts
        packages.append(
            {
                "name": name,
                "version": version,
                "source": source or name,
                "source_version": source_version or version,
                "arch": arch,
            }
        )
    return sorted(packages, key=lambda p: (p["name"], p["arch"]))


def python_packages(venv):
    found = {}
    pattern = os.path.join(venv, "lib", "python3*", "site-packages", "*.dist-info", "METADATA")
    for meta in sorted(glob.glob(pattern)):
        fields = {}
        with open(meta, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # the headers end at the first blank line
                key, _, value = line.partition(":")
                if key in ("Name", "Version") and key not in fields:
                    fields[key] = value.strip()
        if "Name" in fields and "Version" in fields:
            found[fields["Name"].lower()] = {"name": fields["Name"], "version": fields["Version"]}
    return [found[k] for k in sorted(found)]


def kernel_modules(kernel):
    modules = []
    for name in NVIDIA_MODULES:
        info = {}
        for field in MODINFO_FIELDS:
            code, out = run(["modinfo", "-k", kernel, "-F", field, name])
            if code != 0:
                break
            info[field] = out.strip() or None
        if info:
            modules.append({"name": name, **info})
    return modules


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True, help="the pinned kernel release")
    ap.add_argument("--validator-venv", default="/opt/imagectl")
    args = ap.parse_args()
    inventory = {
        "schema_version": 1,
        "kernel": args.kernel,
        "dpkg": dpkg_packages(),
        "python": python_packages(args.validator_venv),
        "kernel_modules": kernel_modules(args.kernel),
    }
    print(json.dumps(inventory, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
