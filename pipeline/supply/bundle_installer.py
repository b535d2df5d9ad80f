"""Install the imagectl validator from a bundle, offline, into a new virtual environment.

This file is copied into every bundle ``imagectl bundle`` makes (as ``install.py``, run by
``install.sh``) and runs on the GPU host with nothing but the host's Python: it imports
the standard library only, and its syntax and calls are Python 3.7's, so a wrong
interpreter gets the message below instead of a SyntaxError.

    sh install.sh --prefix DIR [--python PYTHON] [--host-site-packages]

0. It runs isolated, ``python3 -I -S install.py`` (``install.sh`` starts it so; run any
   other way it starts itself again so before importing anything that is not built into
   the interpreter): the bundle's folder, the working directory, ``PYTHON*`` variables and
   the user's site are never on ``sys.path``, so a module planted in the bundle (a
   ``json.py``, a ``hashlib.pyc``, a ``__pycache__`` entry, a ``.pth``) is never imported;
   it writes no bytecode into the bundle either.
1. The bundle is for one Python (X.Y): another interpreter is refused (exit 2), naming both.
2. Every file of the bundle's folder, of every suffix, is checked against ``BUNDLE.json``'s
   sha256: a changed or missing file, and anything not listed (a file, a folder no listed
   file is in, a symlink, ``.pyc`` and ``__pycache__`` included) is refused before any
   Python of the bundle runs and before anything is written; then pip checks each wheel
   again against ``requirements.lock`` (``--require-hashes``).
3. ``python -I -m venv --without-pip DIR`` (no ensurepip needed), then the bundle's own pip
   (a hashed wheel run as ``python -I pip.whl/pip``) installs every wheel with
   ``--no-index``: no package index is reached, none has to exist.
4. ``--host-site-packages``: the venv also sees the interpreter's own site-packages (a
   ``.pth`` file listing them, after the venv's): the host's torch (with its CUDA build) is
   used and the bundle never carries torch. Every folder written into the ``.pth`` is
   checked first (``trustpath.py``, the bundle's copy of ``imagectl.core.trustpath``, loaded
   only after step 2): it and every folder above it must belong to root or the installing
   user and be writable by nobody else, or the install is refused (exit 2) naming it: every
   root validator run imports from those folders. ``venv --system-site-packages`` would
   not do: from an interpreter that is itself a venv it exposes the base Python's
   packages, not the venv's where torch is installed.
5. On any failure DIR is removed (it did not exist before): nothing half-installed.
"""

import sys

if __name__ == "__main__" and not (sys.flags.isolated and sys.flags.no_site):
    # Started as `python install.py`: this folder is first on sys.path, so the imports
    # below would find a module planted beside this file. Start again isolated first;
    # posix is built into the interpreter and never looked up on sys.path.
    import posix

    posix.execv(sys.executable, [sys.executable, "-I", "-S", *sys.argv])

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
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
    """Every file listed is present with its sha256, and nothing else is in the bundle's
    folder: no file of any suffix, no folder that holds no listed file, no symlink."""
    listed = doc["files"]
    folders = {""}
    for rel in listed:
        parent = os.path.dirname(rel)
        while parent and parent not in folders:
            folders.add(parent)
            parent = os.path.dirname(parent)
    extra = []
    for folder, dirs, files in os.walk(here):  # symlinked folders are listed, not entered
        for name in dirs:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, here)
            if os.path.islink(path) or (rel not in folders and not os.listdir(path)):
                extra.append(rel + ("" if os.path.islink(path) else "/"))
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, here)
            if os.path.islink(path) or (rel not in listed and rel != MANIFEST):
                extra.append(rel)
    if extra:
        raise Refused(
            f"{here}: {', '.join(sorted(extra))} is not part of the bundle (added after it "
            "was made; nothing of it was run). Do not install from this folder: unpack the "
            "bundle again from its tarball into a new, empty folder"
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


HOST_PATHS = (
    "import json, site, sysconfig; print(json.dumps([*site.getsitepackages(), "
    "sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']]))"
)


def host_site_packages():
    """The interpreter's own site-packages (a venv's when it is one), in its order; asked
    of the interpreter run normally (this one runs with -S, which on Python 3.10 leaves a
    venv's prefix unset), from / and isolated."""
    proc = subprocess.run(
        [sys.executable, "-I", "-c", HOST_PATHS], capture_output=True, text=True, cwd="/"
    )
    if proc.returncode != 0:
        raise Refused(
            f"{sys.executable} could not say where its site-packages are: "
            f"{proc.stderr.strip()[-400:]}"
        )
    paths = []
    for path in json.loads(proc.stdout):
        if os.path.isdir(path) and path not in paths:
            paths.append(path)
    return paths


def load_trustpath(here):
    """The bundle's ``trustpath.py`` (``imagectl.core.trustpath``), loaded by its path
    only after ``check_files`` checked it."""
    spec = importlib.util.spec_from_file_location(
        "imagectl_bundle_trustpath", os.path.join(here, "trustpath.py")
    )
    if spec is None or spec.loader is None:
        raise Refused(f"{here}/trustpath.py cannot be loaded; unpack the bundle again")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checked_host_site_packages(here):
    """The folders the ``.pth`` will list, each checked as a trust-deciding path: every
    module in them is imported by every (root) run of the validator."""
    trustpath = load_trustpath(here)
    paths = host_site_packages()
    for path in paths:
        why = trustpath.refusal(path, "host site-packages folder")
        if why is not None:
            raise Refused(
                f"--host-site-packages: {why}. Every run of the validator would import "
                "from it, so nothing was installed"
            )
    return paths


def _venv_site(prefix):
    version = "python{}.{}".format(*sys.version_info[:2])
    return os.path.join(prefix, "lib", version, "site-packages")


def install(here, prefix, host_paths, doc):
    if os.path.lexists(prefix):
        raise Refused(
            f"{prefix} already exists: install into a new folder (the bundle never "
            "installs over an existing one), or remove it first"
        )
    try:
        subprocess.run(
            [sys.executable, "-I", "-m", "venv", "--without-pip", prefix],
            check=True,
            capture_output=True,
        )
        python = os.path.join(prefix, "bin", "python")
        pip = os.path.join(here, doc["installer"], "pip")
        cmd = [
            python,
            "-I",
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
            # pip's verdict is its first ERROR line (a hash mismatch names the file after it,
            # long under a long folder): kept from there, never cut from the front
            text = proc.stderr.strip()
            start = text.find("ERROR")
            told = text[max(start, 0) :][:1200]
            raise Refused(
                f"installing the bundle's wheels into {prefix} failed (pip, no index): {told}. "
                f"The bundle was made for Python {doc['python']} on "
                f"{', '.join(doc.get('platforms') or [])}; this host is "
                f"{sysconfig.get_platform()}: make a bundle with --platform for it"
            )
        if host_paths:  # after pip: it must install every wheel, not find the host's
            with open(os.path.join(_venv_site(prefix), HOST_PTH), "w", encoding="utf-8") as fh:
                fh.write("".join(p + "\n" for p in host_paths))
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
    sys.dont_write_bytecode = True  # no __pycache__ in the bundle (it would be refused next)
    try:
        doc = load_manifest(here)
        check_python(doc, sys.version_info)
        check_files(here, doc)  # before any Python of the bundle is loaded
        host_paths = checked_host_site_packages(here) if args.host_site_packages else []
        prefix = os.path.abspath(args.prefix)
        install(here, prefix, host_paths, doc)
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
