"""The validator's GPU toolkit for one run: installed from a hashed wheelhouse into a venv
that is removed afterwards (``imagectl validate --toolkit-wheelhouse FILE``).

An image keeps only what its fleet nodes run (the boot profile needs no torch). For a
loaded profile, ``imagectl validate-image`` ships the stack's pinned toolkit (torch and its
CUDA variant) to the host as the controller's wheelhouse (``imagectl.supply``: the wheels
and the ``requirements.lock`` that pins each by sha256, one tarball), and the validator:

1. unpacks it into a fresh 0700 folder beside the tarball (regular files with flat names
   only, as the controller made it);
2. makes a venv there without pip (``python -m venv --without-pip``: no ensurepip, which
   costs seconds) and installs the wheels into the venv's site-packages with the
   validator's own pip and no package index: ``pip install --no-index --find-links DIR
   --require-hashes -r DIR/requirements.lock --target SITE`` (pip refuses any wheel whose
   bytes differ from the lock);
3. adds the validator's own site-packages to the venv (a ``.pth`` file), so the venv's
   interpreter imports both imagectl and torch (the toolkit's own packages first);
4. runs the same command line under the venv's interpreter: the CUDA and collective smoke
   tests and their worker processes all run on the toolkit; the child learns what was
   installed from ``IMAGECTL_TOOLKIT_RUN`` and records it in the receipt's host facts
   (``toolkit_venv``);
5. removes the venv, whatever happened (SIGTERM, such as an Ansible timeout, included).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError

ENV = "IMAGECTL_TOOLKIT_RUN"  # set in the child: what the parent installed (JSON)
LOCK_NAME = "requirements.lock"  # the wheelhouse's lock (imagectl.supply.wheelhouse)
HASH_MISMATCH = "THESE PACKAGES DO NOT MATCH THE HASHES"  # pip's words
PTH = "imagectl-validator.pth"


@dataclass(frozen=True)
class Installed:
    """One run's toolkit venv: where, from which wheelhouse, how long the install took."""

    venv: str
    python: str
    wheelhouse: str
    wheelhouse_sha256: str
    wheels: list[str]
    install_s: float


def current() -> dict[str, object] | None:
    """In the child: what the parent installed for this run (None outside such a run)."""
    raw = os.environ.get(ENV)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _unpack(tarball: Path, dest: Path) -> list[str]:
    """The wheelhouse's files into ``dest``; refuses anything but flat regular files."""
    names: list[str] = []
    try:
        with tarfile.open(tarball) as tar:
            for member in tar:
                if not member.isfile() or "/" in member.name or member.name.startswith("."):
                    raise UserError(
                        f"the toolkit wheelhouse holds {member.name!r}, which is not a wheel "
                        "or its lock: a wheelhouse is flat regular files only",
                        where=str(tarball),
                        hint="Ship the tarball imagectl made (imagectl.supply), unchanged",
                    )
                src = tar.extractfile(member)
                assert src is not None  # a regular file
                with src, (dest / member.name).open("wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                names.append(member.name)
    except (tarfile.TarError, OSError) as exc:
        raise UserError(
            f"cannot read the toolkit wheelhouse: {exc}",
            where=str(tarball),
            hint="Pass the tarball validate-image ships: "
            "`imagectl validate --toolkit-wheelhouse FILE`",
        ) from None
    if LOCK_NAME not in names:
        raise UserError(
            f"the toolkit wheelhouse has no {LOCK_NAME}: nothing says which bytes to trust",
            where=str(tarball),
            hint="Ship the tarball imagectl made (imagectl.supply), unchanged",
        )
    return sorted(n for n in names if n.endswith(".whl"))


def _site_packages(venv: Path) -> Path:
    found = glob.glob(str(venv / "lib" / "python3*" / "site-packages"))
    if len(found) != 1:
        raise UserError(f"the toolkit venv {venv} has no single site-packages ({found})")
    return Path(found[0])


def _validator_paths() -> list[str]:
    """This interpreter's own site-packages: where imagectl and its locked packages are."""
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def _pip(args: list[str], what: str) -> None:
    # pip reads only this command line: no configuration file and no PIP_* variable of the
    # host (a PIP_FIND_LINKS folder would offer wheels beside the wheelhouse's)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        told = proc.stderr.strip()[-800:]
        if HASH_MISMATCH in proc.stderr and HASH_MISMATCH not in told:
            told = f"{HASH_MISMATCH}: ... {told}"
        raise UserError(
            f"installing {what} failed (pip exit {proc.returncode}): {told}",
            hint="A hash mismatch means a wheel's bytes differ from the lock the controller "
            "made: the wheelhouse was changed on its way to this host; validate again",
        )


@contextmanager
def toolkit_venv(tarball: Path) -> Iterator[Installed]:
    """A venv holding the wheelhouse's wheels (``--require-hashes``, no index), removed on
    exit; the wheels themselves are removed as soon as they are installed."""
    if not tarball.is_file():
        raise UserError(
            f"the toolkit wheelhouse {tarball} does not exist",
            hint="Pass the tarball validate-image ships: "
            "`imagectl validate --toolkit-wheelhouse FILE`",
        )
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="imagectl-toolkit-", dir=tarball.parent))
    try:
        wheels_dir = work / "wheels"
        wheels_dir.mkdir()
        wheels = _unpack(tarball, wheels_dir)
        venv = work / "venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)],
            check=True,
            capture_output=True,
        )
        site = _site_packages(venv)
        _pip(
            [
                "install", "--quiet", "--disable-pip-version-check", "--no-index",
                "--find-links", str(wheels_dir), "--require-hashes",
                "--requirement", str(wheels_dir / LOCK_NAME),
                "--target", str(site), "--no-warn-script-location",
                # a venv for one run: byte-compiling every module of torch (thousands, most
                # never imported) cost more than unpacking it; Python compiles on import
                "--no-compile",
            ],
            f"the toolkit from {tarball.name}",
        )  # fmt: skip
        shutil.rmtree(wheels_dir)
        lines = [f"import site; site.addsitedir({p!r})" for p in _validator_paths()]
        (site / PTH).write_text("\n".join(lines) + "\n", encoding="utf-8")
        yield Installed(
            venv=str(venv),
            python=str(venv / "bin" / "python"),
            wheelhouse=tarball.name,
            wheelhouse_sha256=_sha256(tarball),
            wheels=wheels,
            install_s=round(time.perf_counter() - started, 3),
        )
    except subprocess.CalledProcessError as exc:
        err = (exc.stderr or b"").decode("utf-8", "replace").strip()[-400:]
        raise UserError(
            f"cannot make the toolkit venv in {work}: {err}",
            hint="The validator's Python needs its venv module (python3-venv on Debian/Ubuntu)",
        ) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_with_toolkit(tarball: Path, argv: list[str]) -> int:
    """``python -m imagectl ARGV`` under the toolkit venv's interpreter, standard input and
    output passed through; the venv is removed afterwards. Returns the child's exit code."""
    restore = _terminate_as_interrupt()
    try:
        with toolkit_venv(tarball) as installed:
            env = dict(os.environ, **{ENV: json.dumps(asdict(installed))})
            print(
                f"toolkit: {len(installed.wheels)} wheel(s) from {installed.wheelhouse} "
                f"installed in {installed.install_s:.1f} s into {installed.venv}",
                file=sys.stderr,
                flush=True,
            )
            child = subprocess.Popen([installed.python, "-m", "imagectl", *argv], env=env)
            try:
                return child.wait()
            except BaseException:
                child.terminate()
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                raise
    finally:
        restore()


def _terminate_as_interrupt() -> Any:
    """SIGTERM interrupts like Ctrl-C, so the venv is removed (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)
