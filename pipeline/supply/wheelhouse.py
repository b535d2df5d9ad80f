"""A wheelhouse: the wheels one target installs, checked against a lock, as one tarball.

``ensure_wheelhouse`` downloads on the controller, for the target's Python and platform,
exactly the lock's wheels (``pip download --require-hashes --no-deps``: pip refuses a
byte that differs from the lock), and packs them with the target's own lock
(``requirements.lock``) into ``<folder>/<key>.tar``. A cached tarball is checked against
the lock again before it is reused (``verify_tarball``); one that does not match is
discarded and downloaded again, or the build stops naming the file.

On the host the tarball is the whole input: unpacked into DIR, ``pip install --no-index
--find-links DIR --require-hashes -r DIR/requirements.lock`` needs no network (the
validator role; a validation host later on).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from imagectl.core.errors import UserError
from imagectl.redact import redact_url, scrub
from imagectl.supply.lockfile import Lock, load

LOCK_NAME = "requirements.lock"
HASH_MISMATCH = "THESE PACKAGES DO NOT MATCH THE HASHES"  # pip's words


class WheelhouseMismatch(UserError):
    """A wheel (or the lock) in a wheelhouse is not what the lock pins."""


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_wheels(
    wheels: Mapping[str, bytes], hashes: Mapping[tuple[str, str], frozenset[str]], *, where: str
) -> None:
    """Every wheel is one the lock pins, by name, version and sha256; none is missing."""
    found: set[tuple[str, str]] = set()
    for filename, data in sorted(wheels.items()):
        try:
            name, version, _, _ = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            raise WheelhouseMismatch(f"{filename} is not a wheel", where=where) from None
        key = (canonicalize_name(name), str(version))
        digest = sha256_of(data)
        if key not in hashes:
            raise WheelhouseMismatch(
                f"{filename}: {key[0]}=={key[1]} is not in the lock", where=where
            )
        if digest not in hashes[key]:
            raise WheelhouseMismatch(
                f"{filename} has sha256 {digest}, which is not one the lock pins for "
                f"{key[0]}=={key[1]} ({', '.join(sorted(hashes[key]))}): the file was "
                "changed after it was downloaded",
                where=where,
            )
        found.add(key)
    missing = sorted(f"{n}=={v}" for n, v in set(hashes) - found)
    if missing:
        raise WheelhouseMismatch(f"no wheel for {', '.join(missing)}", where=where)


def verify_tarball(tarball: Path, lock: Lock, python: str) -> None:
    """The cached tarball holds exactly the lock's wheels for ``python`` and its lock."""
    wheels: dict[str, bytes] = {}
    carried = None
    try:
        with tarfile.open(tarball) as tar:
            for member in tar.getmembers():
                if not member.isfile() or "/" in member.name or member.name.startswith("."):
                    raise WheelhouseMismatch(
                        f"unexpected member {member.name!r}", where=str(tarball)
                    )
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                if member.name == LOCK_NAME:
                    carried = data.decode("utf-8", "replace")
                else:
                    wheels[member.name] = data
    except (tarfile.TarError, OSError) as exc:
        raise WheelhouseMismatch(f"unreadable: {exc}", where=str(tarball)) from None
    if carried != lock.for_python(python):
        raise WheelhouseMismatch(f"its {LOCK_NAME} is not the lock's", where=str(tarball))
    check_wheels(wheels, lock.hashes_for(python), where=str(tarball))


def download_command(
    lock_file: Path, dest: Path, *, python: str, platforms: Iterable[str]
) -> list[str]:
    """pip's argv: the index comes through the environment (``_pip_env``)."""
    return [
        sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
        "--dest", str(dest), "--only-binary=:all:", "--no-deps", "--require-hashes",
        "--python-version", python, "--implementation", "cp",
        *[arg for p in platforms for arg in ("--platform", p)], "--platform", "any",
        "-r", str(lock_file),
    ]  # fmt: skip


def _pip_env(index_url: str | None) -> dict[str, str]:
    # The user's index and mirrors stay (the hashes make any of them safe); a constraint
    # file or find-links folder of this machine must not change what is downloaded, nor
    # an extra index what is found beside a named one. A named index (and any credentials
    # in its URL) goes through the environment, never argv, which every user can read in
    # /proc.
    env = dict(os.environ, PIP_CONSTRAINT="", PIP_FIND_LINKS="")
    if index_url:
        env["PIP_INDEX_URL"] = index_url
        env["PIP_EXTRA_INDEX_URL"] = ""
    return env


def ensure_wheelhouse(
    lock_path: Path,
    *,
    python: str,
    platforms: Iterable[str],
    folder: Path,
    index_url: str | None = None,
    what: str = "wheels",
) -> Path:
    """``<folder>/<key>.tar``: the lock's wheels for ``python``, checked, with its lock."""
    lock = load(lock_path)
    if python not in lock.pythons:
        raise UserError(
            f"the lock is made for Python {', '.join(lock.pythons)}, not {python}",
            where=str(lock_path),
            hint=f"Add {python} to its targets and regenerate it ({lock.command})",
        )
    platforms = tuple(platforms)
    target_lock = lock.for_python(python)
    key = sha256_of("\n".join([target_lock, python, *platforms]).encode())[:16]
    folder.mkdir(parents=True, exist_ok=True)
    tarball = folder / f"{key}.tar"
    refused = ""
    if tarball.is_file():
        try:
            verify_tarball(tarball, lock, python)
            return tarball
        except WheelhouseMismatch as exc:
            refused = exc.render()
            tarball.unlink()
    with tempfile.TemporaryDirectory(prefix=f"{key}.", dir=folder) as tmp:
        wheels = Path(tmp) / "wheels"
        wheels.mkdir()
        (Path(tmp) / LOCK_NAME).write_text(target_lock, encoding="utf-8")
        cmd = download_command(Path(tmp) / LOCK_NAME, wheels, python=python, platforms=platforms)
        env = _pip_env(index_url)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if proc.returncode != 0:
            cached = f" (the cached wheelhouse was refused: {refused})" if refused else ""
            told = scrub(proc.stderr.strip()[-600:], *([index_url] if index_url else []))
            if HASH_MISMATCH in proc.stderr and HASH_MISMATCH not in told:
                told = f"{HASH_MISMATCH}: ... {told}"
            source = f" from {redact_url(index_url)}" if index_url else ""
            raise UserError(
                f"downloading the {what} pinned in {lock_path} for Python {python}{source} "
                f"failed{cached}: {told}",
                hint="The build needs the package index (or a mirror of it); a hash "
                "mismatch means the index served other bytes than the lock pins",
            )
        files = {p.name: p.read_bytes() for p in sorted(wheels.iterdir())}
        check_wheels(files, lock.hashes_for(python), where=f"{what} from the index")
        partial = Path(tmp) / "wheelhouse.tar"
        with tarfile.open(partial, "w") as tar:
            _add(tar, LOCK_NAME, target_lock.encode())
            for name, data in files.items():
                _add(tar, name, data)
        shutil.move(str(partial), tarball)
    return tarball


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def tarball_wheels(tarball: Path) -> list[str]:
    """The wheel file names a wheelhouse tarball holds."""
    with tarfile.open(tarball) as tar:
        return sorted(n for n in tar.getnames() if n.endswith(".whl"))
