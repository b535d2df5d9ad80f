"""The efa role runs AWS's EFA installer as root only once it is verified: the tarball's
sha256 is the pinned one and AWS's detached signature on it verifies (gpgv) with the key
whose fingerprint is pinned.

The role's own tasks run with the real ansible-playbook against a folder standing in for
https://efa-installer.amazonaws.com: a stand-in installer tarball, a real OpenPGP key made
by gpg and a real detached signature of it (the layout of AWS's EC2 User Guide: the
tarball, ``<tarball>.sig`` and ``aws-efa-installer.key`` at the URL's root). The pins
themselves are AWS's published ones (images/compat/efa.yaml, with their sources).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from openpgp_keys import gpg_key

from imagectl.core.errors import UserError
from imagectl.paths import find_workspace
from imagectl.supply.efa import load_efa
from tests.support import ROOT, require_tool

VERSION = "1.43.2"


def test_pins_are_awss_with_their_sources() -> None:
    pins = load_efa(find_workspace(ROOT).compat_dir)
    assert pins.key.fingerprints == ("4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC",)
    assert pins.key.key_file == "aws-efa-installer.key"
    assert pins.sha256["1.43.2"] == (
        "de15c5bdbc83b952afbde876110830c604ad0796680e5157c05f7c1979a41069"
    )
    with pytest.raises(UserError, match="EFA installer 9.9.9 has no pinned sha256"):
        pins.installer_sha256("9.9.9", where="stack x")


def test_every_stack_installer_is_pinned() -> None:
    """Each stack's network.efa.installer has a sha256 (a build would stop at plan)."""
    pins = load_efa(find_workspace(ROOT).compat_dir)
    import yaml

    for path in sorted((ROOT / "images" / "stacks").glob("*.yaml")):
        efa = (yaml.safe_load(path.read_text()).get("network") or {}).get("efa")
        if efa:
            assert pins.installer_sha256(str(efa["installer"]), where=path.name)


def _tarball(marker: Path, extra: str = "") -> bytes:
    """A stand-in installer: efa_installer.sh writes ``marker`` (it ran)."""
    script = f"#!/bin/sh\necho \"$@\" > '{marker}'\n{extra}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("aws-efa-installer/efa_installer.sh")
        info.mode = 0o755
        info.size = len(script)
        tar.addfile(info, io.BytesIO(script.encode()))
    return buf.getvalue()


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, str]:
    home = tmp_path_factory.mktemp("gpg") / "aws"
    armored, fprs = gpg_key(home, "stand-in EFA <efa@example.invalid>", "rsa2048")
    return home, armored, fprs[0]


def _sign(home: Path, data: Path, sig: Path) -> None:
    gpg = require_tool("gpg")
    subprocess.run([gpg, "--batch", "--homedir", str(home.resolve()), "--passphrase", "",
                    "--pinentry-mode", "loopback", "--detach-sign", "-o", str(sig), str(data)],
                   check=True, capture_output=True)  # fmt: skip


def _site(root: Path, tarball: bytes, key: bytes, sign_with: Path, signed: bytes) -> Path:
    """A folder laid out as AWS's download URL: the tarball, its .sig and the key."""
    root.mkdir(parents=True)
    site = root / "efa-site"
    site.mkdir()
    (site / f"aws-efa-installer-{VERSION}.tar.gz").write_bytes(tarball)
    (site / "aws-efa-installer.key").write_bytes(key)
    (root / "signed.tar.gz").write_bytes(signed)
    _sign(sign_with, root / "signed.tar.gz", site / f"aws-efa-installer-{VERSION}.tar.gz.sig")
    return site


# host -> (tarball served, tarball signed, tarball whose sha256 is pinned, another key)
CASES = {
    "verified": ("good", "good", "good", False),
    "other_sha256": ("bad", "bad", "good", False),  # the download is not the pinned one
    "bad_signature": ("bad", "good", "bad", False),  # a wrong pin; AWS's key never signed it
    "other_key": ("good", "good", "good", True),  # the URL serves a key nobody pinned
}


@pytest.fixture(scope="module")
def runs(signer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path, Path]]:
    """One ansible-playbook run, one inventory host per case: {case: (its output lines,
    its marker, its work folder)}."""
    require_tool("ansible-playbook")
    require_tool("gpgv")
    home, armored, fpr = signer
    tmp = tmp_path_factory.mktemp("efa")
    other, _ = gpg_key(tmp / "other", "someone else <x@example.invalid>")
    hosts: dict[str, dict[str, object]] = {}
    for case, (served, signed, pinned, other_key) in CASES.items():
        marker = tmp / case / "installer-ran"
        tarballs = {"good": _tarball(marker), "bad": _tarball(marker, "echo tampered\n")}
        site = _site(tmp / case, tarballs[served], other if other_key else armored, home,
                     tarballs[signed])  # fmt: skip
        hosts[case] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "efa_enabled": True,
            "efa_installer_version": VERSION,
            "efa_ofi_nccl_version": "1.16.3",
            "efa_installer_sha256": hashlib.sha256(tarballs[pinned]).hexdigest(),
            "efa_key_fingerprints": [fpr],
            "efa_download_url": site.as_uri(),
            "efa_work_dir": str(tmp / case / "work"),
        }
    inventory = tmp / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    playbook = tmp / "efa.yml"
    playbook.write_text("- hosts: all\n  gather_facts: false\n  roles: [efa]\n")
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROOT / "playbooks" / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORKS": "4",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
           str(playbook)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    out = proc.stdout + proc.stderr
    return {
        case: (
            "\n".join(ln for ln in out.splitlines() if f"[{case}]" in ln),
            tmp / case / "installer-ran",
            tmp / case / "work",
        )
        for case in CASES
    }


def test_the_verified_installer_runs(runs) -> None:
    out, marker, work = runs["verified"]
    assert marker.read_text().split() == ["-y"], out[-3000:]
    assert not work.exists(), "the work folder is removed"


def test_a_tarball_with_another_sha256_never_runs(runs) -> None:
    out, marker, work = runs["other_sha256"]
    assert "fatal: [other_sha256]" in out and "The checksum for" in out, out[-3000:]
    assert "did not match" in out
    assert not marker.exists() and not work.exists()


def test_a_tarball_whose_signature_fails_never_runs(runs) -> None:
    out, marker, work = runs["bad_signature"]
    assert "fatal: [bad_signature]" in out and "BAD signature" in out, out[-3000:]
    assert not marker.exists() and not work.exists()


def test_a_key_with_another_fingerprint_is_refused(runs) -> None:
    out, marker, work = runs["other_key"]
    assert "fatal: [other_key]" in out and "not the pinned fingerprint(s)" in out, out[-3000:]
    assert not marker.exists() and not work.exists()
