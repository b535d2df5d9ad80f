"""Real OpenPGP keys for tests, made by gpg in a private home (tests/ansible helper)."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from pathlib import Path

from imagectl.core.sockets import socket_base
from tests.support import require_tool


def gpg_home(home: Path) -> Path:
    """A gpg home reached as ``home``: a link to a short folder, since gpg-agent's sockets
    live in the home and a long path (a long TMPDIR) does not fit a socket's address.
    Give gpg ``home.resolve()``, never the link's own (long) path."""
    short = Path(
        tempfile.mkdtemp(prefix="gpg-", dir=socket_base(len("gpg-xxxxxxxx/S.gpg-agent.browser")))
    )
    atexit.register(shutil.rmtree, short, True)
    home.parent.mkdir(parents=True, exist_ok=True)
    home.symlink_to(short, target_is_directory=True)
    return short


def gpg_key(home: Path, uid: str, algo: str = "ed25519") -> tuple[bytes, list[str]]:
    """(armored public key, [primary fpr, subkey fprs...]) of a fresh key made by gpg in
    ``home`` (``gpg_home``: use ``home.resolve()`` as --homedir for it afterwards)."""
    gpg = require_tool("gpg")
    base = [gpg, "--batch", "--homedir", str(gpg_home(home)), "--passphrase", ""]
    subprocess.run([*base, "--quick-gen-key", uid, algo, "default", "never"],
                   check=True, capture_output=True)  # fmt: skip
    armored = subprocess.run([*base, "--armor", "--export", uid], check=True, capture_output=True)
    colons = subprocess.run([*base, "--with-colons", "--fingerprint", "--fingerprint", uid],
                            check=True, capture_output=True, text=True)  # fmt: skip
    fprs = [line.split(":")[9] for line in colons.stdout.splitlines() if line.startswith("fpr:")]
    return armored.stdout, fprs
