"""The roles for real: site.yml with the local stack against a Debian 12 root file system.

debootstrap's rootfs (cached per day, see rootfs.py) gets leftovers a build leaves
behind (host keys, authorized keys, history, credentials, a machine-id), then the real
ansible-playbook runs site.yml inside it twice with the local stack's extra vars from
``write_var_files`` (the production contract) and the validator wheel from
``build_validator_wheel``. testinfra (chroot backend) and dpkg then check the result;
the second run must change nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rootfs as rootfs_mod  # tests/ansible/rootfs.py
from playbook_run import PlaybookRun, run_site

from imagectl.packer.build import build_validator_wheel
from imagectl.packer.variables import PackerRuntime, write_var_files
from imagectl.paths import find_workspace
from imagectl.provenance.inventory import parse_inventory
from imagectl.provenance.sbom import render_sbom
from imagectl.stacks import load_resolved
from imagectl.stacks.resolve import ResolvedStack
from imagectl.supply.lock import LockSpec, write_lock
from imagectl.supply.validator import ensure_validator_wheelhouse
from imagectl.supply.wheelhouse import ensure_wheelhouse
from imagectl.toolkit import PLATFORMS
from imagectl.validators.manifest import parse_manifest
from tests.supply.test_lean_image import runners_among
from tests.support import ROOT, fake_torch_wheel, require_root, require_tool, simple_index

pytestmark = pytest.mark.slow

LEFTOVERS = {
    "etc/ssh/ssh_host_ed25519_key": "fake host key",
    "etc/ssh/ssh_host_ed25519_key.pub": "fake host key",
    "root/.ssh/authorized_keys": "ssh-ed25519 AAAA build@packer",
    "root/.bash_history": "apt-get install secret",
    "root/.aws/credentials": "[default]\naws_secret_access_key=x",
    "var/cache/apt/archives/leftover_1.0_all.deb": "deb",
    "etc/machine-id": "0123456789abcdef0123456789abcdef",
}


@dataclass
class Provisioned:
    root: Path
    first: PlaybookRun
    second: PlaybookRun
    resolved: ResolvedStack
    avars: dict[str, Any]


def _toolkit_wheelhouse(dest: Path) -> Path:
    """A wheelhouse made by the build's own code (lock, then --require-hashes download) of a
    wheel laid out like torch+cu128's (tests/support.py), for the target's Python 3.11."""
    url = simple_index(dest / "toolkit-index", [fake_torch_wheel(dest / "toolkit")])
    spec = LockSpec(
        path=dest / "toolkit.lock", title="stand-in toolkit", command="test",
        requirements=("torch==2.9.1+cu128",), index_url=url, pythons=("3.11",),
        platforms=PLATFORMS,
    )  # fmt: skip
    return ensure_wheelhouse(
        write_lock(spec), python="3.11", platforms=PLATFORMS, folder=dest / "tk", index_url=url
    )


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provisioned]:
    require_root()
    require_tool("debootstrap")
    require_tool("ansible-playbook")
    tmp = tmp_path_factory.mktemp("debian12")
    root = rootfs_mod.unpack(rootfs_mod.tarball(), tmp / "rootfs")
    for rel, content in LEFTOVERS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    ws = find_workspace(ROOT)
    _, resolved = load_resolved(ws.images, "local")
    wheel = build_validator_wheel(ws, tmp / "dist")
    # What every build hands the role: validators/requirements.lock's wheels (Debian 12: 3.11)
    wheelhouse = ensure_validator_wheelhouse("3.11", folder=tmp / "wheelhouse")
    _, avars_file, _, avars = write_var_files(
        resolved, "local", tmp / "vars", PackerRuntime(validator_wheel=wheel)
    )
    toolkit = _toolkit_wheelhouse(tmp)
    try:
        with rootfs_mod.chroot_ready(root):
            extra = (
                "-e", f"validator_wheelhouse={wheelhouse}",
                "-e", "validator_toolkit_torch=2.9.1",
                "-e", "validator_toolkit_cuda=12.8",
                "-e", f"validator_toolkit_wheelhouse={toolkit}",
                "-e", f"manifest_fetch_dir={tmp / 'fetched'}",
            )  # fmt: skip
            first = run_site(root, avars_file, tmp / "first.log", *extra)
            second = (
                run_site(root, avars_file, tmp / "second.log", *extra)
                if first.returncode == 0
                else first
            )
            yield Provisioned(root, first, second, resolved, {**avars, "fetched": tmp / "fetched"})
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def host(provisioned: Provisioned) -> Any:
    import testinfra

    return testinfra.get_host(str(provisioned.root), connection="chroot")


def _dpkg(root: Path, *args: str) -> str:
    """dpkg's own view of the rootfs, read from the host (independent of the roles)."""
    proc = subprocess.run(
        ["dpkg-query", f"--admindir={root}/var/lib/dpkg", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout


def test_first_run_provisions(provisioned: Provisioned) -> None:
    run = provisioned.first
    assert run.returncode == 0, run.tail()
    assert run.failed == 0 and run.changed > 0


def test_second_run_changes_nothing(provisioned: Provisioned) -> None:
    run = provisioned.second
    assert run.returncode == 0, run.tail()
    assert run.changed == 0, f"not idempotent: {run.changed_tasks}"


def test_kernel_and_packages_pinned_and_held(provisioned: Provisioned, host: Any) -> None:
    kernel = provisioned.avars["base_kernel_version"]
    pinned = dict(provisioned.avars["base_packages"])
    assert pinned, "the local stack pins packages"
    held = set(host.check_output("apt-mark showhold").split())
    assert host.package(f"linux-image-{kernel}").is_installed
    assert f"linux-image-{kernel}" in held
    assert host.file(f"/boot/vmlinuz-{kernel}").exists
    assert host.file(f"/boot/initrd.img-{kernel}").exists
    for name, version in pinned.items():
        assert host.package(name).version == version, name
        assert name in held, name
    installed_kernels = [
        line.split()[1]
        for line in _dpkg(
            provisioned.root, "-W", "-f=${db:Status-Abbrev} ${Package}\n", "linux-image-[0-9]*"
        ).splitlines()
        if line[1:2] == "i"  # installed, held or not
    ]
    assert installed_kernels == [f"linux-image-{kernel}"]


def test_unattended_upgrades_leave_pinned_packages_alone(host: Any) -> None:
    conf = host.file("/etc/apt/apt.conf.d/51imagectl-unattended-upgrades")
    assert conf.exists
    for pattern in ('"linux-";', '"nvidia-";', '"libnccl";', '"cuda-";'):
        assert pattern in conf.content_string


def test_manifest_equals_dpkg_truth(provisioned: Provisioned, host: Any) -> None:
    manifest = json.loads(host.file("/etc/imagectl/manifest.json").content_string)
    typed = parse_manifest(manifest)  # the model the validator and drift read
    assert typed.schema_version == 2 and typed.kernel == provisioned.avars["base_kernel_version"]
    root = provisioned.root
    assert manifest["stack"] == "local"
    assert manifest["stack_digest"] == provisioned.resolved.digest
    assert manifest["kernel"] == provisioned.avars["base_kernel_version"]
    assert manifest["kernel_modules"] is None and manifest["nccl"] is None  # no GPU stack
    truth = {}
    for line in _dpkg(root, "-W", "-f=${db:Status-Abbrev}\t${Package}\t${Version}\n").splitlines():
        status, name, version = line.split("\t")
        if status[1:2] == "i" and (
            name.startswith("linux-image-") or name in provisioned.avars["base_packages"]
        ):
            truth[name] = version
    listed = {
        k: v
        for k, v in manifest["packages"].items()
        if k.startswith("linux-image-") or k in provisioned.avars["base_packages"]
    }
    assert listed == truth
    held_truth = sorted(
        line.split()[0]
        for line in subprocess.run(
            ["dpkg", f"--admindir={root}/var/lib/dpkg", "--get-selections"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        if line.split()[1] == "hold"
    )
    assert manifest["held"] == held_truth
    assert set(provisioned.avars["base_packages"]) <= set(manifest["held"])


def test_validator_installed_with_enabled_boot_unit(provisioned: Provisioned, host: Any) -> None:
    assert host.run("/opt/imagectl/bin/imagectl --version").succeeded
    unit = host.file("/etc/systemd/system/imagectl-boot-validate.service")
    assert (
        "ExecStart=/opt/imagectl/bin/imagectl validate --profile boot --no-hygiene "
        "--expect /etc/imagectl/expect.json --history /var/lib/imagectl/boots "
        "-o /var/lib/imagectl/boots/%b.json"
    ) in unit.content_string
    assert "ln -sfn boots/%b.json /var/lib/imagectl/boot-receipt.json" in unit.content_string
    assert host.file(
        "/etc/systemd/system/multi-user.target.wants/imagectl-boot-validate.service"
    ).is_symlink
    assert (
        host.run("systemctl is-enabled imagectl-boot-validate.service").stdout.strip() == "enabled"
    )
    expect = json.loads(host.file("/etc/imagectl/expect.json").content_string)
    # Written unchanged from the vars file: one producer (imagectl.stacks.expectations).
    assert expect == provisioned.avars["validator_expect"]
    pins = provisioned.resolved.pins()
    assert expect["stack_digest"] == pins.stack_digest
    assert expect["driver"] is None and expect["cuda"] is None
    assert expect["kernel"] == provisioned.avars["base_kernel_version"]
    assert expect["packages"] == provisioned.avars["base_packages"]
    assert host.file("/var/lib/imagectl").is_directory


def test_the_inventory_is_dpkg_truth_and_is_fetched_back(
    provisioned: Provisioned, host: Any
) -> None:
    """The SBOM's input: every installed package with its source package, read in the
    image, equals dpkg's own view of the root file system read from outside; the
    validator venv's Python packages are listed; the build folder gets the same bytes."""
    text = host.file("/etc/imagectl/inventory.json").content_string
    inv = parse_inventory(text, "/etc/imagectl/inventory.json")
    truth = {}
    for line in _dpkg(
        provisioned.root, "-W",
        "-f=${db:Status-Abbrev}\t${Package}\t${Version}\t${source:Package}\n",
    ).splitlines():  # fmt: skip
        status, name, version, source = line.split("\t")
        if status[1:2] == "i":
            truth[name] = (version, source or name)
    assert {p.name: (p.version, p.source) for p in inv.dpkg} == truth
    assert inv.kernel == provisioned.avars["base_kernel_version"]
    names = {p.name.lower() for p in inv.python}
    assert {"imagectl", "pydantic", "click"} <= names
    fetched = Path(provisioned.avars["fetched"])
    assert (fetched / "inventory.json").read_text() == text
    assert (fetched / "manifest.json").read_text() == host.file(
        "/etc/imagectl/manifest.json"
    ).content_string
    sbom = render_sbom(inv, stack="local", stack_digest=provisioned.resolved.digest,
                       cloud="local", build_id="b-test", distro="debian")  # fmt: skip
    assert len(json.loads(sbom)["components"]) == len(truth) + len(inv.python) + 1 + len(
        inv.kernel_modules
    )


def test_the_image_carries_no_test_runner(provisioned: Provisioned, host: Any) -> None:
    """The image's own list of installed Python packages (the validator venv, as its
    inventory reports it) holds no test runner: nothing test-only ships to the fleet."""
    inv = parse_inventory(
        host.file("/etc/imagectl/inventory.json").content_string, "/etc/imagectl/inventory.json"
    )
    names = [p.name for p in inv.python]
    assert "imagectl" in {n.lower() for n in names}
    assert runners_among(names) == [], names


def test_validator_toolkit_installed_offline_and_in_the_manifest(
    provisioned: Provisioned, host: Any
) -> None:
    """The pinned toolkit goes into the validator's venv from its wheelhouse, its wheels do
    not stay in the image, and the manifest records what was installed."""
    out = host.run("/opt/imagectl/bin/python /opt/imagectl/toolkit-version.py 2.9.1 12.8")
    assert out.rc == 0, out.stdout + out.stderr
    assert json.loads(out.stdout) == {"torch": "2.9.1+cu128", "cuda": "12.8"}
    assert not host.file("/opt/imagectl/toolkit").exists
    assert not host.file("/opt/imagectl/toolkit.tar").exists
    manifest = json.loads(host.file("/etc/imagectl/manifest.json").content_string)
    assert manifest["validator_toolkit"] == {"torch": "2.9.1+cu128", "cuda": "12.8"}


def test_hygiene_removed_build_leftovers(provisioned: Provisioned, host: Any) -> None:
    for rel in LEFTOVERS:
        if rel == "etc/machine-id":
            continue
        assert not host.file("/" + rel).exists, rel
    assert host.run("ls /etc/ssh/ssh_host_* 2>/dev/null").stdout == ""
    assert host.file("/etc/machine-id").size == 0
    assert host.run("ls /var/cache/apt/archives/*.deb 2>/dev/null").stdout == ""
