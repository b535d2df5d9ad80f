"""The validator bundle: one tarball that installs imagectl's validator on a GPU host with no
network (``imagectl bundle --python X.Y [--platform TAG ...] -o FILE``).

The tarball holds one folder, ``imagectl-bundle-<version>-py<X.Y>/``:

- ``wheels/``: the imagectl wheel (``pip wheel --no-deps`` of this checkout) and every
  wheel ``validators/requirements.lock`` pins for that Python and platform, downloaded
  with ``--require-hashes`` (``imagectl.supply.wheelhouse``: a byte that differs from the
  lock is refused, and a cached wheelhouse is checked again before it is reused);
- ``requirements.lock``: the lock for that Python plus the imagectl wheel's own sha256, the
  one file ``pip install --no-index --require-hashes`` reads on the host;
- ``installer/``: pip itself as a wheel, pinned by ``validators/installer.lock`` (a host
  Python without pip or ensurepip, as Debian and Ubuntu ship it, still installs);
- ``install.sh`` and ``install.py`` (``bundle_installer.py``, standard library only, run
  isolated: ``python3 -I -S``), and ``trustpath.py`` (``imagectl.core.trustpath``, which
  ``install.py`` loads only after every file was checked, for ``--host-site-packages``);
- ``BUNDLE.json``: the Python, the platforms, the imagectl version and every file's sha256,
  which ``install.py`` checks (and that nothing else is in the folder) before any other
  file of the bundle is loaded and before it writes anything.

torch is never in it: the host's own torch (with its CUDA build) is used through
``install.sh --host-site-packages`` and ``imagectl validate --toolkit host``. Without torch a
bundle is about 12 MB (measured: ``tests/supply/test_bundle.py`` prints it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from imagectl import __version__
from imagectl.core.errors import UserError
from imagectl.paths import Workspace, cache_dir
from imagectl.supply.lock import installer_lock_path, validator_lock_path
from imagectl.supply.lockfile import load
from imagectl.supply.own_wheel import build_validator_wheel
from imagectl.supply.targets import PLATFORMS
from imagectl.supply.wheelhouse import ensure_wheelhouse

FORMAT = 1
MIN_PYTHON = (3, 10)  # pyproject's requires-python


@dataclass(frozen=True)
class Bundle:
    """What ``make_bundle`` wrote."""

    path: Path
    folder: str  # the tarball's one top folder
    python: str
    platforms: tuple[str, ...]
    files: dict[str, str]  # path inside the folder -> sha256
    size: int
    sha256: str


def _python_tuple(python: str) -> tuple[int, int]:
    try:
        major, minor = (int(p) for p in python.split("."))
    except ValueError:
        raise UserError(
            f"--python {python!r} is not a Python version: give X.Y, such as 3.12",
            hint="The host's `python3 --version` says which",
        ) from None
    return major, minor


def _check_python(python: str, pythons: tuple[str, ...]) -> None:
    if _python_tuple(python) < MIN_PYTHON:
        raise UserError(
            f"--python {python}: imagectl's validator needs Python "
            f"{'.'.join(map(str, MIN_PYTHON))} or newer (pyproject.toml requires-python)",
            hint="Install a newer python3 on the host (Ubuntu 22.04 ships 3.10), then make the "
            "bundle for it",
        )
    if python not in pythons:
        raise UserError(
            f"--python {python}: validators/requirements.lock pins wheels for Python "
            f"{', '.join(pythons)} only, so no bundle can be made for {python}",
            hint="Add the Python to imagectl.supply.targets and regenerate the lock "
            "(python -m imagectl.supply.lock validator), or use one of those",
        )


def _check_platforms(platforms: tuple[str, ...], pinned: tuple[str, ...], lock: Path) -> None:
    """Only platforms the lock's hashes were made for: any other is refused before any
    download (the index would be blamed for what the lock cannot serve)."""
    other = [p for p in platforms if p not in pinned]
    if other:
        raise UserError(
            f"--platform {', '.join(other)}: {lock.name} pins wheels (their sha256) for "
            f"{', '.join(pinned)} only, so no bundle can be made for "
            f"{'it' if len(other) == 1 else 'them'}; nothing was downloaded",
            where=str(lock),
            hint="Bundle for one of the pinned platforms, or add the host's tags (an aarch64 "
            "host such as GH200 or GB200: manylinux_2_28_aarch64, manylinux_2_17_aarch64, "
            "...) to imagectl.supply.targets.PLATFORMS in an imagectl checkout and "
            "regenerate the lock there (`python -m imagectl.supply.lock validator`)",
        )


def _check_source_tree(ws: Workspace) -> None:
    """The bundle carries imagectl's own wheel, built from its source tree: an installed
    imagectl (no ``pyproject.toml``) has none to build from."""
    if (ws.root / "pyproject.toml").is_file():
        return
    raise UserError(
        f"a bundle carries imagectl's own wheel, built from its source tree, and {ws.root} "
        f"is an installed imagectl {__version__} without one (no pyproject.toml there); "
        "nothing was downloaded",
        hint="Run it in a checkout of imagectl (the folder with pyproject.toml, "
        "images/ and validators/), or point $IMAGECTL_ROOT at one",
    )


def _unpack_tar(tarball: Path) -> dict[str, bytes]:
    with tarfile.open(tarball) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wheel_line(filename: str, data: bytes) -> str:
    name, version = filename.split("-")[:2]
    return f"{name}=={version} \\\n    --hash=sha256:{_sha(data)}\n"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0  # the members carry no build time (BUNDLE.json's "created" says when)
    tar.addfile(info, io.BytesIO(data))


def make_bundle(
    ws: Workspace,
    *,
    python: str,
    out: Path,
    platforms: Iterable[str] = PLATFORMS,
    index_url: str | None = None,
) -> Bundle:
    """Write the bundle for ``python`` on ``platforms`` to ``out`` (atomically)."""
    platforms = tuple(platforms) or PLATFORMS
    lock_path = validator_lock_path(ws)
    lock = load(lock_path)
    _check_python(python, lock.pythons)
    _check_platforms(platforms, lock.platforms, lock_path)
    _check_source_tree(ws)
    folder = cache_dir() / "wheelhouse"
    deps = _unpack_tar(
        ensure_wheelhouse(
            lock_path,
            python=python,
            platforms=platforms,
            folder=folder / "validator",
            index_url=index_url,
            what=f"validator's dependency wheels for {', '.join(platforms)}",
        )
    )
    installer = _unpack_tar(
        ensure_wheelhouse(
            installer_lock_path(ws),
            python=python,
            platforms=platforms,
            folder=folder / "installer",
            index_url=index_url,
            what="bundle's installer (pip)",
        )
    )
    with tempfile.TemporaryDirectory(prefix="imagectl-bundle-") as tmp:
        own = Path(build_validator_wheel(ws, Path(tmp)))
        own_data = own.read_bytes()
    pip_wheel = next(n for n in installer if n.endswith(".whl"))
    # the lock pip installs from: the dependencies' pins and the imagectl wheel's own
    lock_text = deps.pop("requirements.lock").decode() + _wheel_line(own.name, own_data)
    members: dict[str, bytes] = {
        "requirements.lock": lock_text.encode(),
        f"wheels/{own.name}": own_data,
        **{f"wheels/{n}": d for n, d in deps.items()},
        f"installer/{pip_wheel}": installer[pip_wheel],
        "install.py": (resources.files("imagectl.supply") / "bundle_installer.py").read_bytes(),
        "install.sh": (resources.files("imagectl.supply") / "bundle_install.sh").read_bytes(),
        "trustpath.py": (resources.files("imagectl.core") / "trustpath.py").read_bytes(),
    }  # fmt: skip
    files = {name: _sha(data) for name, data in sorted(members.items())}
    manifest = {
        "format": FORMAT,
        "imagectl": __version__,
        "python": python,
        "platforms": list(platforms),
        "installer": f"installer/{pip_wheel}",
        "created": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "files": files,
    }
    top = f"imagectl-bundle-{__version__}-py{python}"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
            _add(tar, f"{top}/BUNDLE.json", json.dumps(manifest, indent=2).encode() + b"\n")
            for name, data in sorted(members.items()):
                _add(tar, f"{top}/{name}", data, 0o755 if name == "install.sh" else 0o644)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    data = out.read_bytes()
    return Bundle(out, top, python, platforms, files, len(data), _sha(data))
