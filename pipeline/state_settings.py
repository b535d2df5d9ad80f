"""The state folder's settings: ``<state>/settings.toml``, read by every command.

What a person would otherwise export in every new shell, kept once beside the catalog it
belongs to. One key today:

- ``attestation_trust``: the trust file ``verify``, ``promote`` and ``verify-node`` use
  when neither ``--trust`` nor ``$IMAGECTL_ATTESTATION_TRUST`` names one (before the
  repository's anchor). ``imagectl attest --new-key --save-trust`` writes it for the
  local demonstration; a relative path is taken from the state folder.

A file that is not TOML, or a key that is not a string, is exit 2 naming the file. The
file names the trust anchor, so it is checked as the trust file is
(``imagectl.core.trustpath.refusal``): owned by another user, or writable by others, or in a
folder (or below one) that is, it is exit 2 naming the path and the fix, never read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from platformdirs import user_state_path

try:
    import tomllib  # type: ignore[import-not-found,unused-ignore]
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write
from imagectl.core.trustpath import refusal
from imagectl.paths import ENV_STATE, state_dir

FILE = "settings.toml"
KEYS = ("attestation_trust",)


def _state(state: Path | None) -> Path:
    """The state folder, not created (reading a setting makes no folder)."""
    if state is not None:
        return state
    override = os.environ.get(ENV_STATE)
    return Path(override) if override else user_state_path("imagectl", appauthor=False)


def settings_path(state: Path | None = None) -> Path:
    return _state(state) / FILE


def load_settings(state: Path | None = None) -> dict[str, str]:
    """The settings (``{}`` without a file)."""
    path = settings_path(state)
    if not path.exists() and not path.is_symlink():
        return {}
    why = refusal(path, "state folder's settings file")
    if why is not None:
        raise UserError(why, where=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}", where=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(
            f"not TOML: {exc}",
            where=str(path),
            hint=f"Fix it (keys: {', '.join(KEYS)}, each a string), or remove it",
        ) from None
    out: dict[str, str] = {}
    for key, value in data.items():
        if key not in KEYS or not isinstance(value, str):
            raise UserError(
                f"{key!r} is not a setting this tool knows, or not a string",
                where=str(path),
                hint=f"Known keys: {', '.join(KEYS)}, each a string",
            )
        out[key] = value
    return out


def setting_path(key: str, state: Path | None = None) -> Path | None:
    """A path setting, relative ones taken from the state folder; None when unset."""
    raw = load_settings(state).get(key, "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    return path if path.is_absolute() else _state(state) / path


def save_setting(key: str, value: str, state: Path | None = None) -> Path:
    """Set ``key`` (the others kept); returns the settings file."""
    if key not in KEYS:
        raise ValueError(key)
    folder = state or state_dir()  # created (0700) to write
    settings = {**load_settings(folder), key: value}
    path = settings_path(folder)
    text = "".join(f"{k} = {json.dumps(v)}\n" for k, v in sorted(settings.items()))
    header = "# imagectl state folder settings (imagectl.state_settings)\n"
    atomic_write(path, header + text, mode=0o600)
    return path
