"""The NVIDIA-repository roles without NVIDIA's repository.

1. The apt preferences nvidia_repo generates for a GPU stack, rendered by the real
   role, make the real apt choose exactly the pinned versions over newer decoys.
2. site.yml in --check mode with that stack (hygiene and validator off) against a
   private apt world of stand-in packages: every NVIDIA role runs through, installs
   the pinned versions and would hold every package it installs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from apt_sandbox import make_sandbox
from jinja2 import Environment
from openpgp_keys import gpg_key

from imagectl.packer.variables import ansible_vars, write_var_files
from imagectl.stacks import load_resolved
from imagectl.validators.checks.software import version_matches
from imagectl.validators.expectations import Expectations
from tests.support import ROOT, flat, require_root, require_tool

HERE = Path(__file__).resolve().parent
ROLES = ROOT / "playbooks" / "roles"
NVIDIA_ROLES = (
    "nvidia_driver",
    "fabric_manager",
    "cuda_toolkit",
    "nccl",
    "dcgm",
    "container_toolkit",
)


def _vars(stack: str, cloud: str) -> dict[str, Any]:
    """Role defaults overlaid with the stack's extra vars, templates rendered."""
    merged: dict[str, Any] = {}
    for f in sorted(ROLES.glob("*/defaults/main.yml")):
        merged.update(yaml.safe_load(f.read_text()) or {})
    _, resolved = load_resolved(ROOT / "images", stack)
    merged.update(ansible_vars(resolved, cloud))
    env = Environment()
    for _ in range(3):
        for k, v in merged.items():
            if not k.endswith(("_packages", "_suffix")):
                continue
            if isinstance(v, str) and "{{" in v:
                merged[k] = env.from_string(v).render(**merged)
            elif isinstance(v, list):
                merged[k] = [
                    env.from_string(x).render(**merged) if isinstance(x, str) else x for x in v
                ]
    return merged


def _pinned(v: dict[str, Any]) -> dict[str, str]:
    """package -> the exact version the stack wants (Debian revision as NVIDIA ships it)."""
    out = {}
    for p in v["nvidia_driver_packages"]:
        out[p] = f"{v['nvidia_driver_version']}-0ubuntu1"
    for p in v["fabric_manager_packages"]:
        out[p] = f"{v['fabric_manager_version']}-1"
    for p in v["cuda_toolkit_packages"]:
        out[p] = f"{v['cuda_toolkit_version']}-1"
    for p in v["nccl_packages"]:
        out[p] = v["nccl_version"]
    for p in v["dcgm_packages"]:
        out[p] = v["dcgm_version"]
    for p in v["container_toolkit_packages"]:
        out[p] = v["container_toolkit_version"]
    return out


def _decoy(version: str) -> str:
    """A newer version of the same package (what an unpinned install would take)."""
    epoch, _, rest = version.rpartition(":")
    head, dot, tail = rest.partition(".")
    newer = f"{int(head) + 1}{dot}{tail}"
    return f"{epoch}:{newer}" if epoch else newer


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        **extra,
        "ANSIBLE_CONFIG": str(ROOT / "playbooks" / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(ROLES),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, str], Path]:
    require_tool("ansible-playbook")
    require_tool("dpkg-deb")
    require_tool("dpkg-scanpackages")
    require_tool("apt-get")
    v = _vars("h100-training", "aws")
    pinned = _pinned(v)
    packages = {name: [ver, _decoy(ver)] for name, ver in pinned.items()}
    kernel = v["base_kernel_version"]
    for name in (
        f"linux-image-{kernel}",
        f"linux-headers-{kernel}",
        f"linux-modules-extra-{kernel}",
    ):
        packages[name] = ["1.0"]
    base = tmp_path_factory.mktemp("apt")
    return v, make_sandbox(base, packages), base


def test_generated_preferences_pick_exact_versions(
    world: tuple[dict[str, Any], dict[str, str], Path], tmp_path: Path
) -> None:
    require_root()  # the role writes the file owned by root
    v, apt_env, base = world
    _, resolved = load_resolved(ROOT / "images", "h100-training")
    _, avars_file, _, _ = write_var_files(resolved, "aws", tmp_path)
    prefs = base / "etc/preferences.d/imagectl-nvidia-pins"
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            str(HERE / "render_pins.yml"),
            "--extra-vars",
            f"@{avars_file}",
            "-e",
            f"nvidia_repo_preferences_file={prefs}",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
        ],
        capture_output=True,
        text=True,
        env=_env({}),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = prefs.read_text()
    assert f"Pin: version {v['nvidia_driver_version']}-*" in text
    assert f"Pin: version {v['nccl_version']}\n" in text
    pinned = _pinned(v)
    sim = subprocess.run(
        ["apt-get", "-s", "install", *pinned],
        env={**os.environ, **apt_env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert sim.returncode == 0, sim.stdout + sim.stderr
    chosen = dict(re.findall(r"^Inst (\S+) \((\S+) ", sim.stdout, re.M))
    assert chosen == pinned
    # The image's expect.json names exactly what apt installs under these pins, and the
    # validator's version rule accepts what apt chose (NVIDIA's Debian revisions included).
    expect = Expectations.model_validate(v["validator_expect"])
    nvidia = {n: pin for n, pin in expect.packages.items() if n in chosen}
    assert set(nvidia) == set(chosen)
    assert all(version_matches(chosen[n], pin) for n, pin in nvidia.items()), nvidia
    # Without the preferences apt takes the decoys: the pins are what keeps versions exact.
    prefs.unlink()
    sim = subprocess.run(
        ["apt-get", "-s", "install", *pinned],
        env={**os.environ, **apt_env},
        capture_output=True,
        text=True,
        check=False,
    )
    chosen = dict(re.findall(r"^Inst (\S+) \((\S+) ", sim.stdout, re.M))
    assert chosen["libnccl2"] == _decoy(v["nccl_version"])
    # ... and the validator would refuse every package apt took unpinned.
    assert not any(version_matches(chosen[n], pin) for n, pin in nvidia.items())


def test_site_check_mode_installs_pins_and_holds_everything(
    world: tuple[dict[str, Any], dict[str, str], Path], tmp_path: Path
) -> None:
    require_root()
    v, apt_env, _ = world
    _, resolved = load_resolved(ROOT / "images", "h100-training")
    _, avars_file, _, _ = write_var_files(resolved, "aws", tmp_path)
    # The key is downloaded and its fingerprint checked even in check mode: serve a real
    # stand-in key from a file:// URL and pin its fingerprint instead of NVIDIA's.
    armored, fprs = gpg_key(tmp_path / "gpg", "stand-in <nvidia@example.invalid>")
    key = tmp_path / "nvrepo" / v["nvidia_repo_slug"] / v["nvidia_repo_arch"] / "3bf863cc.pub"
    key.parent.mkdir(parents=True)
    key.write_bytes(armored)
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            "--check",
            str(ROOT / "playbooks" / "site.yml"),
            "--extra-vars",
            f"@{avars_file}",
            "-e",
            "hygiene_enabled=false",
            "-e",
            "validator_enabled=false",
            "-e",
            "efa_enabled=false",
            "-e",
            f"nvidia_repo_base_url=file://{tmp_path / 'nvrepo'}",
            "--extra-vars",
            json.dumps({"nvidia_repo_key_fingerprints": [fprs[0]]}),
            "-e",
            "ansible_python_interpreter=/usr/bin/python3",
        ],
        capture_output=True,
        text=True,
        env=_env(apt_env),
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert re.search(r"failed=0", out)
    pinned = _pinned(v)
    for role in NVIDIA_ROLES:
        assert f"TASK [{role} : " in flat(out), f"{role} did not run"
    # Every pinned package goes through a hold task (in check mode dpkg does not know
    # packages that were only simulated, so the item fails and is ignored).
    held: set[str] = set()
    task = ""
    for line in out.splitlines():
        if line.startswith("TASK ["):
            task = line
        m = re.match(r"^(?:changed|ok|failed): \[localhost\] .*\(item=(\S+)\)", line)
        if m and " : Hold " in task:
            held.add(m[1])
    assert set(pinned) <= held, sorted(set(pinned) - held)
    assert f"linux-image-{v['base_kernel_version']}" in held


def test_imex_is_pinned_at_the_driver_version_where_the_gpu_needs_it(
    world: tuple[dict[str, Any], dict[str, str], Path], tmp_path: Path
) -> None:
    """NVIDIA IMEX User Guide, "Installation": nvidia-imex comes from the driver's branch at
    the driver's exact version. fabric_manager installs it at that version; the apt pins
    must hold it there too, or a later ``apt-get upgrade`` takes a newer nvidia-imex."""
    require_root()
    v, _, base = world
    _, resolved = load_resolved(ROOT / "images", "h100-training")
    _, avars_file, _, _ = write_var_files(resolved, "aws", tmp_path)
    prefs = base / "etc/preferences.d/imagectl-nvidia-pins-imex"
    imex = f"nvidia-imex-{v['nvidia_driver_version'].split('.')[0]}"
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            str(HERE / "render_pins.yml"),
            "--extra-vars",
            f"@{avars_file}",
            "--extra-vars",
            json.dumps(
                {
                    "nvidia_repo_preferences_file": str(prefs),
                    "ansible_python_interpreter": sys.executable,
                    "fabric_manager_imex_enabled": True,
                    "fabric_manager_imex_packages": [imex],
                }
            ),
        ],
        capture_output=True,
        text=True,
        env=_env({}),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stanzas = prefs.read_text().split("\n\n")
    pinned = [s for s in stanzas if f"Package: {imex}" in s]
    assert len(pinned) == 1, prefs.read_text()
    assert f"Pin: version {v['fabric_manager_version']}-*" in pinned[0]


def test_site_refuses_an_enabled_role_without_its_package_names(tmp_path: Path) -> None:
    """The one guard in site.yml: a vars file that enables a role but carries no package
    names (an old or hand-written vars file) stops before anything is installed."""
    require_tool("ansible-playbook")
    _, resolved = load_resolved(ROOT / "images", "h100-training")
    _, avars_file, _, _ = write_var_files(resolved, "aws", tmp_path)
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            "--check",
            str(ROOT / "playbooks" / "site.yml"),
            "--extra-vars",
            f"@{avars_file}",
            "--extra-vars",
            json.dumps({"dcgm_packages": [], "ansible_python_interpreter": sys.executable}),
        ],
        capture_output=True,
        text=True,
        env=_env({}),
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert "dcgm_packages is empty" in flat(out), out[-4000:]
    assert "nvidia_driver_packages is empty" not in flat(out)
    assert "TASK [base : " not in flat(out) and "TASK [nvidia_repo : " not in flat(out)
