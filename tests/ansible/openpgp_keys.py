"""Real OpenPGP keys for tests, made by gpg in a private home (tests/ansible helper)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support import require_tool


def gpg_key(home: Path, uid: str, algo: str = "ed25519") -> tuple[bytes, list[str]]:
    """(armored public key, [primary fpr, subkey fprs...]) of a fresh key made by gpg."""
    gpg = require_tool("gpg")
    home.mkdir(parents=True, mode=0o700)
    base = [gpg, "--batch", "--homedir", str(home), "--passphrase", ""]
    subprocess.run([*base, "--quick-gen-key", uid, algo, "default", "never"],
                   check=True, capture_output=True)  # fmt: skip
    armored = subprocess.run([*base, "--armor", "--export", uid], check=True, capture_output=True)
    colons = subprocess.run([*base, "--with-colons", "--fingerprint", "--fingerprint", uid],
                            check=True, capture_output=True, text=True)  # fmt: skip
    fprs = [line.split(":")[9] for line in colons.stdout.splitlines() if line.startswith("fpr:")]
    return armored.stdout, fprs
