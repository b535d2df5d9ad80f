#!/usr/bin/env python3
"""Print the image's full inventory (JSON) from ground truth, for its SBOM.

Every installed dpkg package (name, version, source package and version, architecture),
the validator venv's Python distributions (their dist-info METADATA, no import), the
pinned kernel with its NVIDIA kernel modules (modinfo: version, vermagic, srcversion),
and the distribution from os-release (ID, VERSION_ID: what a vulnerability scanner
matches OS packages against). imagectl turns it into a CycloneDX SBOM on the controller
(imagectl.provenance.sbom).

Hashes: dpkg keeps no hash of a package, only per-file md5sums of what it unpacked
(/var/lib/dpkg/info/*.md5sums), which identify no package. The SHA256 of a package's
.deb is in apt's package indexes (the Packages files apt verified the download against),
read here through apt itself (``apt-get indextargets`` names them, ``apt-helper
cat-file`` decompresses any format apt stores). A package gets the hash only when the
indexes list exactly one for its name, version and architecture; a package installed
from a file, or whose index is gone, gets none.

Standard library only: it runs on the image (Ubuntu 22.04's Python 3.10 and newer).
"""

import argparse
import functools
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the role installs it beside
import manifest_io
from manifest_io import emit

run = functools.partial(manifest_io.run, missing_ok=True)  # no kmod: no modules to list

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
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")  # os-release(5): this order
OS_FIELDS = {
    "ID": "id",
    "VERSION_ID": "version_id",
    "VERSION_CODENAME": "version_codename",
    "PRETTY_NAME": "pretty_name",
}
APT_HELPER = "/usr/lib/apt/apt-helper"
# A Packages file is ~60,000 stanzas of which an image installs a few hundred: the
# stanzas naming an installed package are picked out first (a split and one search each),
# and only those parsed line by line (all of them took ~20 s in a booted build under TCG).
PACKAGE_FIELD = re.compile(r"^Package:[ \t]*(\S+)", re.M)
BLANK_LINE = re.compile(r"\n[ \t]+(?=\n)")  # a line of blanks separates stanzas too


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


def os_release(paths=OS_RELEASE):
    """os-release(5)'s ID, VERSION_ID, VERSION_CODENAME and PRETTY_NAME (shell-quoted
    values unquoted), or None when neither file exists."""
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            continue
        found = {}
        for line in lines:
            key, sep, value = line.strip().partition("=")
            if not sep or key not in OS_FIELDS:
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            found[OS_FIELDS[key]] = value
        return found if found.get("id") else None
    return None


def _stanzas(text):
    """(Package, Version, Architecture, SHA256) of each deb822 stanza of a Packages file."""
    fields: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if "Package" in fields:
                yield (
                    fields.get("Package"),
                    fields.get("Version"),
                    fields.get("Architecture"),
                    fields.get("SHA256"),
                )
            fields = {}
        elif not line[0].isspace():
            key, _, value = line.partition(":")
            if key in ("Package", "Version", "Architecture", "SHA256"):
                fields[key] = value.strip()


def _stanzas_of(text, names):
    """``_stanzas(text)`` of the stanzas whose Package is one of ``names`` only."""
    if BLANK_LINE.search(text):
        text = BLANK_LINE.sub("\n", text)
    for chunk in text.split("\n\n"):
        found = PACKAGE_FIELD.search(chunk)
        if found and found.group(1) in names:
            yield from _stanzas(chunk)


def apt_hashes(installed):
    """(name, version, arch) -> SHA256 of the .deb, from apt's package indexes, for the
    ``installed`` triples the indexes list with exactly one hash."""
    code, out = run(["apt-get", "indextargets", "--format", "$(FILENAME)", "Created-By: Packages"])
    if code != 0 or not os.path.exists(APT_HELPER):
        return {}
    seen: dict[tuple[str, str, str], set[str]] = {}
    names = {name for name, _, _ in installed}
    for index in out.split():
        if not os.path.exists(index):
            continue  # a target apt knows but never downloaded
        code, text = run([APT_HELPER, "cat-file", index])
        if code != 0:
            continue
        for name, version, arch, sha256 in _stanzas_of(text, names):
            key = (name, version, arch)
            if key in installed and sha256:
                seen.setdefault(key, set()).add(sha256.lower())
    return {key: next(iter(hashes)) for key, hashes in seen.items() if len(hashes) == 1}


def with_hashes(packages):
    hashes = apt_hashes({(p["name"], p["version"], p["arch"]) for p in packages})
    for p in packages:
        sha256 = hashes.get((p["name"], p["version"], p["arch"]))
        if sha256:
            p["sha256"] = sha256
    return packages


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
    ap.add_argument("--output", default="", help="write the JSON here (default: stdout)")
    args = ap.parse_args()
    inventory = {
        "schema_version": 1,
        "kernel": args.kernel,
        "os": os_release(),
        "dpkg": with_hashes(dpkg_packages()),
        "python": python_packages(args.validator_venv),
        "kernel_modules": kernel_modules(args.kernel),
    }
    emit(inventory, args.output)


if __name__ == "__main__":
    main()
