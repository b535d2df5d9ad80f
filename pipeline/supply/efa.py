"""The AWS EFA installer a build runs as root, pinned: each version's sha256 and AWS's
signing key by fingerprint (images/compat/efa.yaml; playbooks/roles/efa checks both)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import load_data
from imagectl.supply.apt_keys import AptKey

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FPR = re.compile(r"^[0-9A-F]{40}([0-9A-F]{24})?$")


@dataclass(frozen=True)
class EfaPins:
    key: AptKey  # the key AWS signs the installer tarballs with
    sha256: dict[str, str]  # installer version -> sha256 of aws-efa-installer-<v>.tar.gz

    def installer_sha256(self, version: str, where: str) -> str:
        if version not in self.sha256:
            raise UserError(
                f"EFA installer {version} has no pinned sha256 in images/compat/efa.yaml "
                f"(pinned: {', '.join(sorted(self.sha256)) or 'none'})",
                where=where,
                hint=(
                    "Add the version under installers: with the SHA256 of AWS's table "
                    '"Verify the EFA installer using a checksum" (EC2 User Guide) and its '
                    "source, or pin an installer listed there"
                ),
            )
        return self.sha256[version]


def load_efa(compat_dir: Path) -> EfaPins:
    path = compat_dir / "efa.yaml"
    doc = load_data(path) or {}
    key = doc.get("key") or {}
    fprs = tuple(str(f).replace(" ", "").upper() for f in key.get("fingerprints") or ())
    if not fprs or not all(_FPR.match(f) for f in fprs) or not key.get("source"):
        raise UserError(
            "key: needs key_file, source and fingerprints of 40 or 64 hex digits",
            where=str(path),
        )
    sha256: dict[str, str] = {}
    for version, entry in (doc.get("installers") or {}).items():
        digest = str((entry or {}).get("sha256", "")).lower()
        if not _SHA256.match(digest) or not (entry or {}).get("source"):
            raise UserError(
                f"installers.{version}: needs a sha256 of 64 hex digits and its source",
                where=str(path),
            )
        sha256[str(version)] = digest
    return EfaPins(
        AptKey("aws-efa-installer", str(key.get("key_file", "")), fprs, str(key["source"])),
        sha256,
    )
