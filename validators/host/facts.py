"""Software facts of the host, gathered by running the host's own tools and reading its files.

No test framework is involved: a fleet image carries the validator, and nothing test-only
(pytest, testinfra) is installed into it (``tests/supply/test_lean_image.py``).

Each fact has one gatherer (``GATHERERS``). ``LiveFacts`` gathers on first use and caches;
``RecordedFacts`` answers from a snapshot's ``host`` section, so the checks read facts the
same way live and replayed. File-based facts (hygiene, the image manifest) are read under
a configurable root, so tests can point them at a temporary tree.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from imagectl.validators.host.clouds import credential_files
from imagectl.validators.host.metadata import cloud_image_id

# Packages recorded in a snapshot besides those the expectations name.
RELEVANT_PACKAGES = re.compile(
    r"^(nvidia|libnvidia|libnccl|cuda-|datacenter-gpu-manager|linux-image|libcuda)"
)
SERVICES = ("nvidia-fabricmanager", "nvidia-persistenced", "nvidia-imex")
HISTORY_FILES = (
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".mysql_history",
    ".psql_history",
)
BUILD_KEY_GLOBS = (".ssh/id_rsa", ".ssh/id_ed25519", ".ssh/id_ecdsa", ".ssh/id_dsa")


class FactMissing(LookupError):
    """A replayed snapshot does not hold this fact."""


class LiveFacts:
    def __init__(self, *, root: str | Path = "/", extra_packages: tuple[str, ...] = ()):
        self.root = Path(root)
        self.extra_packages = tuple(extra_packages)
        self._cache: dict[str, object] = {}
        self.kind = "live"

    def get(self, name: str) -> object:
        if name not in self._cache:
            self._cache[name] = GATHERERS[name](self)
        return self._cache[name]

    def under_root(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def run(self, command: str) -> tuple[int, str]:
        """A shell command's exit status and standard output (its own stderr is kept out)."""
        out = subprocess.run(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        return out.returncode, out.stdout.decode("utf-8", errors="replace")

    def read(self, path: Path) -> str | None:
        """A regular file's text; None when it is absent or not a file."""
        if not os.path.isfile(path):
            return None
        return Path(path).read_bytes().decode("utf-8", errors="replace")

    @staticmethod
    def is_dir(path: Path) -> bool:
        return os.path.isdir(path)

    @staticmethod
    def mtime(path: Path) -> float | None:
        try:
            return float(int(os.stat(path).st_mtime))
        except OSError:
            return None


class RecordedFacts:
    def __init__(self, host_section: dict[str, object]):
        self._data = host_section
        self.kind = "replay"

    def get(self, name: str) -> object:
        if name not in self._data:
            raise FactMissing(f"the snapshot has no host fact '{name}'")
        return self._data[name]


def collect_all(facts: LiveFacts) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in GATHERERS:
        try:
            out[name] = facts.get(name)
        except Exception as exc:  # a fact that cannot be read is recorded as such
            out[name] = {"$error": f"{type(exc).__name__}: {exc}"}
    return out


# -- gatherers ------------------------------------------------------------------------


def _kernel_release(f: LiveFacts) -> str:
    return f.run("uname -r")[1].strip()


def _hostname(f: LiveFacts) -> str:
    return f.run("hostname")[1].strip()


def _os_release(f: LiveFacts) -> dict[str, str]:
    text = f.read(f.under_root("/etc/os-release")) or ""
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return {k: out[k] for k in ("ID", "VERSION_ID", "PRETTY_NAME") if k in out}


_NVRM = re.compile(r"NVRM version:\s+(?P<desc>.*?)\s+(?P<version>\d+\.\d+(?:\.\d+)?)\s")


def parse_module_version(text: str) -> dict[str, object]:
    """/proc/driver/nvidia/version -> version and flavour (open / proprietary)."""
    m = _NVRM.search(text + " ")
    if not m:
        return {"loaded": True, "version": None, "flavour": None, "raw": text.strip()[:300]}
    flavour = "open" if "Open Kernel Module" in m["desc"] else "proprietary"
    return {"loaded": True, "version": m["version"], "flavour": flavour, "raw": text.strip()[:300]}


def _nvidia_module(f: LiveFacts) -> dict[str, object]:
    text = f.read(Path("/proc/driver/nvidia/version"))
    if text:
        info = parse_module_version(text)
        info["source"] = "/proc/driver/nvidia/version"
        return info
    # not loaded: what is installed for this kernel?
    rc, version = f.run("modinfo -F version nvidia 2>/dev/null")
    _, lic = f.run("modinfo -F license nvidia 2>/dev/null")
    installed = rc == 0 and bool(version.strip())
    flavour = None
    if installed:
        flavour = "open" if "GPL" in lic else "proprietary"
    return {
        "loaded": False,
        "installed": installed,
        "version": version.strip() or None,
        "flavour": flavour,
        "source": "modinfo nvidia",
    }


def _ldconfig(f: LiveFacts, soname: str) -> str | None:
    """Path of ``soname`` in the linker cache (the 64-bit entry first)."""
    _, out = f.run("ldconfig -p 2>/dev/null")
    found = [line.strip() for line in out.splitlines() if line.strip().startswith(soname + " ")]
    found.sort(key=lambda line: "64" not in line.split("=>")[0])
    for line in found:
        if "=>" in line:
            return line.split("=>", 1)[1].strip()
    return None


def _nvml_library(f: LiveFacts) -> dict[str, object]:
    path = _ldconfig(f, "libnvidia-ml.so.1")
    if path is None:
        return {"path": None, "version": None}
    _, real = f.run(f"readlink -f {shlex.quote(path)}")
    m = re.search(r"\.so\.(\d+\.\d+(?:\.\d+)?)$", real.strip())
    return {"path": real.strip() or path, "version": m[1] if m else None}


_NCCL_PROBE = (
    "import ctypes,sys\n"
    "lib=ctypes.CDLL(sys.argv[1])\n"
    "v=ctypes.c_int()\n"
    "rc=lib.ncclGetVersion(ctypes.byref(v))\n"
    "print(rc, v.value)\n"
)


def nccl_code_to_version(code: int) -> str:
    """ncclGetVersion's integer: 22602 -> 2.26.2 (>= 2.9: X*10000+Y*100+Z), 2708 -> 2.7.8."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _nccl(f: LiveFacts) -> dict[str, object]:
    """The system NCCL's own version, read from libnccl (ncclGetVersion), in a subprocess."""
    path = _ldconfig(f, "libnccl.so.2")
    if path is None:
        return {"path": None, "version": None, "error": "libnccl.so.2 not in the linker cache"}
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(_NCCL_PROBE)} {shlex.quote(path)}"
    rc, out = f.run(cmd)
    parts = out.split()
    if rc != 0 or len(parts) != 2 or parts[0] != "0":
        return {"path": path, "version": None, "error": f"ncclGetVersion failed: {out.strip()}"}
    return {"path": path, "version": nccl_code_to_version(int(parts[1])), "error": None}


def _packages(f: LiveFacts) -> dict[str, dict[str, object]]:
    _rc, out = f.run(
        "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' 2>/dev/null"
    )
    wanted = set(f.extra_packages)
    pkgs: dict[str, dict[str, object]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        name, version, status = parts
        if not (RELEVANT_PACKAGES.match(name) or name in wanted):
            continue
        installed = len(status) > 1 and status[1] == "i"  # "ii", "hi": fully installed
        pkgs[name] = {"version": version, "held": status[:1] == "h", "installed": installed}
    return pkgs


def _services(f: LiveFacts) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for name in SERVICES:
        _rc, state = f.run(f"systemctl is-active {name} 2>/dev/null")
        _, enabled = f.run(f"systemctl is-enabled {name} 2>/dev/null")
        out[name] = {
            "active": state.strip() == "active",
            "state": state.strip() or "unknown",
            "enabled": enabled.strip() == "enabled",
        }
    return out


def _json_fact(f: LiveFacts, path: str) -> object:
    """A JSON file of the image, None when absent, ``{"$invalid": why}`` when corrupt."""
    text = f.read(f.under_root(path))
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        return {"$invalid": f"line {exc.lineno}: {exc.msg}"}


def _manifest(f: LiveFacts) -> object:
    return _json_fact(f, "/etc/imagectl/manifest.json")


def _manifest_sha256(f: LiveFacts) -> str | None:
    """sha256 of the manifest's bytes: what a signed attestation names as its subject."""
    text = f.read(f.under_root("/etc/imagectl/manifest.json"))
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def _expect_file(f: LiveFacts) -> object:
    """The image's own expectations (/etc/imagectl/expect.json), so a replay can use them."""
    return _json_fact(f, "/etc/imagectl/expect.json")


def _boot(f: LiveFacts) -> dict[str, object]:
    _, uptime = f.run("cat /proc/uptime")
    boot_id = f.read(Path("/proc/sys/kernel/random/boot_id")) or ""
    try:
        up = float(uptime.split()[0])
    except (IndexError, ValueError):
        up = None

    return {
        "boot_id": boot_id.strip() or None,
        "uptime_s": up,
        "booted_at": (time.time() - up) if up is not None else None,
    }


class FoundFile(TypedDict):
    """One file ``find`` listed: its path, size in bytes and mtime (seconds)."""

    path: str
    size: int
    mtime: float


def _find(f: LiveFacts, dirs: list[Path], depth: int) -> list[FoundFile]:
    existing = [str(d) for d in dirs if f.is_dir(d)]
    if not existing:
        return []
    cmd = (
        "find "
        + " ".join(shlex.quote(d) for d in existing)
        + f" -maxdepth {depth} -type f -printf '%p\\t%s\\t%T@\\n' 2>/dev/null"
    )
    _, out = f.run(cmd)
    entries: list[FoundFile] = []
    for line in out.splitlines():
        parts = line.rsplit("\t", 2)
        if len(parts) == 3:
            entries.append({"path": parts[0], "size": int(parts[1]), "mtime": float(parts[2])})
    return entries


def _rel(f: LiveFacts, path: str) -> str:
    return "/" + str(Path(path).relative_to(f.root)) if f.root != Path("/") else path


def _hygiene(f: LiveFacts) -> dict[str, object]:
    root = f.root
    homes = [root / "root"]
    home_dir = root / "home"
    if f.is_dir(home_dir):
        _, out = f.run(f"ls -1 {shlex.quote(str(home_dir))}")
        homes += [home_dir / n for n in out.split()]
    files = _find(f, homes, 4)
    rel_in_home = []
    for e in files:
        for h in homes:
            if e["path"].startswith(str(h) + "/"):
                rel_in_home.append((e, e["path"][len(str(h)) + 1 :]))
                break
    history = [
        {**e, "path": _rel(f, e["path"])}
        for e, rel in rel_in_home
        if rel in HISTORY_FILES and e["size"] > 0
    ]
    creds = credential_files()  # data/clouds.yaml: each cloud's CLI's, and the others
    credentials = [{**e, "path": _rel(f, e["path"])} for e, rel in rel_in_home if rel in creds]
    build_keys = [
        {**e, "path": _rel(f, e["path"])} for e, rel in rel_in_home if rel in BUILD_KEY_GLOBS
    ]
    packer_keys = []
    for e, rel in rel_in_home:
        if rel == ".ssh/authorized_keys":
            text = f.read(Path(e["path"])) or ""
            if "packer" in text.lower():
                packer_keys.append({**e, "path": _rel(f, e["path"])})
    host_keys = [
        {**e, "path": _rel(f, e["path"])}
        for e in _find(f, [root / "etc/ssh"], 1)
        if re.search(r"/ssh_host_\w+_key$", e["path"])
    ]
    machine_id = f.read(f.under_root("/etc/machine-id"))
    cloud_instance = f.mtime(f.under_root("/var/lib/cloud/instance"))
    machine_id_mtime = f.mtime(f.under_root("/etc/machine-id"))
    first_boot = None
    if cloud_instance is not None:
        first_boot = cloud_instance
    elif machine_id_mtime is not None and (machine_id or "").strip():
        first_boot = machine_id_mtime
    return {
        "root": str(root),
        "booted_root": root == Path("/"),
        "first_boot": first_boot,
        "machine_id": None if machine_id is None else machine_id.strip(),
        "ssh_host_keys": host_keys,
        "build_keys": build_keys + packer_keys,
        "credentials": credentials,
        "shell_history": history,
    }


def _image_id(f: LiveFacts) -> dict[str, object]:
    return cloud_image_id(f.read(Path("/sys/class/dmi/id/sys_vendor")) or "")


GATHERERS: dict[str, Callable[[LiveFacts], object]] = {
    "hostname": _hostname,
    "kernel_release": _kernel_release,
    "os_release": _os_release,
    "boot": _boot,
    "nvidia_module": _nvidia_module,
    "nvml_library": _nvml_library,
    "nccl": _nccl,
    "packages": _packages,
    "services": _services,
    "manifest": _manifest,
    "manifest_sha256": _manifest_sha256,
    "expect_file": _expect_file,
    "cloud_image": _image_id,
    "hygiene": _hygiene,
}
