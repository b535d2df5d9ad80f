"""Install the imagectl validator from a bundle, offline, into a new virtual environment.

This file is copied into every bundle ``imagectl bundle`` makes (as ``install.py``, run by
``install.sh``) and runs on the GPU host with nothing but the host's Python: it imports
the standard library only, and its syntax and calls are Python 3.7's, so a wrong
interpreter gets the message below instead of a SyntaxError.

    sh install.sh --prefix DIR [--python PYTHON] [--host-site-packages]

1. The bundle is for one Python (X.Y): another interpreter is refused (exit 2), naming both.
2. Every file of the bundle is checked against ``BUNDLE.json``'s sha256 (a changed, missing
   or added file is refused before anything is written), then pip checks each wheel again
   against ``requirements.lock`` (``--require-hashes``).
3. ``python -m venv --without-pip DIR`` (no ensurepip needed), then the bundle's own pip
   (a hashed wheel run as ``python pip.whl/pip``) installs every wheel with ``--no-index``:
   no package index is reached, none has to exist.
4. ``--host-site-packages``: the venv also sees the interpreter's own site-packages (a
   ``.pth`` file listing them, after the venv's): the host's torch (with its CUDA build) is
   used and the bundle never carries torch. ``venv --system-site-packages`` would not do:
   from an interpreter that is itself a venv it exposes the base Python's packages, not the
   venv's where torch is installed.
5. On any failure DIR is removed (it did not exist before): nothing half-installed.
"""

import argparse
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig

EXIT_BAD_INPUT = 2
MANIFEST = "BUNDLE.json"
HOST_PTH = "imagectl-host-site-packages.pth"


class Refused(Exception):
    """One paragraph for the operator; exit 2."""


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_manifest(here):
    path = os.path.join(here, MANIFEST)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise Refused(
            f"{path}: cannot read the bundle's manifest ({exc}); unpack the bundle "
            "again from the tarball imagectl bundle made"
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != 1
        or not isinstance(doc.get("files"), dict)
    ):
        raise Refused(f"{path}: not an imagectl bundle manifest (format 1)")
    return doc


def check_python(doc, version_info):
    want = str(doc.get("python"))
    have = "{}.{}".format(*version_info[:2])
    if have != want and tuple(version_info[:2]) < (3, 10):
        raise Refused(
            f"this bundle is for Python {want}, but {sys.executable} is Python {have}, older "
            "than any imagectl runs on (3.10 or newer). Run install.sh --python "
            f"/path/to/python{want}"
        )
    if have != want:
        raise Refused(
            f"this bundle is for Python {want}, but {sys.executable} is Python {have}: its wheels "
            f"(compiled ones such as pydantic-core) are built for CPython {want} only. Run "
            f"install.sh --python /path/to/python{want}, or make a bundle for this host with "
            f"`imagectl bundle --python {have} -o FILE` on a machine that reaches the package "
            "index"
        )


def check_files(here, doc):
    """Every file listed is present with its sha256, and nothing else is in the bundle."""
    listed = doc["files"]
    found = set()
    for folder, _dirs, files in os.walk(here):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), here)
            if rel != MANIFEST and not rel.endswith(".pyc") and "__pycache__" not in rel:
                found.add(rel)
    extra = sorted(found - set(listed))
    if extra:
        raise Refused(
            f"{here}: {', '.join(extra)} is not part of the bundle (added after it "
            "was made); unpack the bundle again from its tarball"
        )
    for rel in sorted(listed):
        path = os.path.join(here, rel)
        if not os.path.isfile(path):
            raise Refused(f"{path}: missing from the bundle; unpack it again from its tarball")
        digest = _sha256(path)
        if digest != listed[rel]:
            raise Refused(
                f"{path} has sha256 {digest}, not the {listed[rel]} the bundle's manifest "
                "records: the file was changed after the bundle was made. Do not install it; "
                "compare the tarball's sha256 with the one imagectl bundle printed"
            )


def host_site_packages():
    """The interpreter's own site-packages (a venv's when it is one), in its order."""
    paths = []
    for path in [
        *site.getsitepackages(),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    ]:
        if os.path.isdir(path) and path not in paths:
            paths.append(path)
    return paths


def _venv_site(prefix):
    version = "python{}.{}".format(*sys.version_info[:2])
    return os.path.join(prefix, "lib", version, "site-packages")


def install(here, prefix, host_packages, doc):
    if os.path.lexists(prefix):
        raise Refused(
            f"{prefix} already exists: install into a new folder (the bundle never "
            "installs over an existing one), or remove it first"
        )
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", prefix],
            check=True,
            capture_output=True,
        )
        python = os.path.join(prefix, "bin", "python")
        pip = os.path.join(here, doc["installer"], "pip")
        cmd = [
            python,
            pip,
            "install",
            "--isolated",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--quiet",
            "--find-links",
            os.path.join(here, "wheels"),
            "--require-hashes",
            "-r",
            os.path.join(here, "requirements.lock"),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            told = proc.stderr.strip()[-800:]
            raise Refused(
                f"installing the bundle's wheels into {prefix} failed (pip, no index): {told}. "
                f"The bundle was made for Python {doc['python']} on "
                f"{', '.join(doc.get('platforms') or [])}; this host is "
                f"{sysconfig.get_platform()}: make a bundle with --platform for it"
            )
        if host_packages:  # after pip: it must install every wheel, not find the host's
            with open(os.path.join(_venv_site(prefix), HOST_PTH), "w", encoding="utf-8") as fh:
                fh.write("".join(p + "\n" for p in host_site_packages()))
        with open(os.path.join(prefix, "imagectl-bundle.json"), "w", encoding="utf-8") as fh:
            json.dump({k: doc[k] for k in doc if k != "files"}, fh, indent=2, sort_keys=True)
    except BaseException:
        shutil.rmtree(prefix, ignore_errors=True)
        raise


def main(argv):
    parser = argparse.ArgumentParser(prog="install.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", required=True, help="the new venv's folder")
    parser.add_argument(
        "--host-site-packages",
        action="store_true",
        help="also see this Python's own packages (the host's torch)",
    )
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        doc = load_manifest(here)
        check_python(doc, sys.version_info)
        check_files(here, doc)
        prefix = os.path.abspath(args.prefix)
        install(here, prefix, args.host_site_packages, doc)
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"error: installing the bundle into {args.prefix} failed: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"installed imagectl {doc['imagectl']} into {prefix}: {prefix}/bin/imagectl")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
