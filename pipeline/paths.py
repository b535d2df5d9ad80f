"""Where things live: the workspace (a checkout with images/ and playbooks/) and state.

The workspace is found, in order, from ``--root`` / ``IMAGECTL_ROOT``, by walking up from
the current directory to a folder holding ``images/stacks``, and finally the copy of
``images/`` bundled in the installed package (so ``imagectl lint`` and ``compat check``
work from a wheel install too).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from platformdirs import user_cache_path, user_state_path

import imagectl.images
from imagectl.core.errors import UserError

ENV_ROOT = "IMAGECTL_ROOT"
ENV_STATE = "IMAGECTL_STATE_DIR"
ENV_CACHE = "IMAGECTL_CACHE_DIR"


@dataclass(frozen=True)
class Workspace:
    root: Path
    images: Path
    bundled: bool = False  # no workspace found: the installed package's own images/

    @property
    def stacks_dir(self) -> Path:
        return self.images / "stacks"

    @property
    def compat_dir(self) -> Path:
        return self.images / "compat"

    @property
    def catalog_dir(self) -> Path:
        return self.images / "catalog"

    @property
    def playbooks(self) -> Path:
        return self.root / "playbooks"

    def relative(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(path)


def bundled_images() -> Path:
    """The images/ data folder shipped inside the package."""
    return Path(imagectl.images.__file__).parent


def find_workspace(explicit: str | os.PathLike[str] | None = None) -> Workspace:
    candidate = explicit or os.environ.get(ENV_ROOT)
    if candidate:
        root = Path(candidate).resolve()
        return Workspace(root=root, images=root / "images")
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "images" / "stacks").is_dir():
            return Workspace(root=folder, images=folder / "images")
    images = bundled_images()
    return Workspace(root=images.parent, images=images, bundled=True)


def state_dir() -> Path:
    """The user's state directory (XDG): catalog database, caches, generated files.

    Created 0700 (it holds the catalog and per-run SSH keys; an existing folder keeps
    its mode). A path that is a file, or a folder that cannot be written, is exit 2."""
    override = os.environ.get(ENV_STATE)
    path = Path(override) if override else user_state_path("imagectl", appauthor=False)
    return _own_folder(path, ENV_STATE)


def cache_dir() -> Path:
    """The user's cache directory (XDG): what this machine can make again from public
    inputs and every state folder may share (the local base's debootstrap tree, the KVM
    probe's answer for this boot). No secret, no record: deleting it costs time only.
    Created like the state folder; the same errors."""
    override = os.environ.get(ENV_CACHE)
    path = Path(override) if override else user_cache_path("imagectl", appauthor=False)
    return _own_folder(path, ENV_CACHE)


def _own_folder(path: Path, env: str) -> Path:
    what = "cache" if env == ENV_CACHE else "state"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot use the {what} folder {path}: {exc.strerror or exc}",
            hint=f"Point ${env} at a folder you can write (it is created when missing)",
        ) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(
            f"cannot use the {what} folder {path}: not writable",
            hint=f"Point ${env} at a folder you can write (it is created when missing)",
        )
    return path
