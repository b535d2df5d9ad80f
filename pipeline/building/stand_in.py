"""A build that provisions nothing still gets an SBOM, marked as a stand-in.

``imagectl build --skip-provisioning`` (an emulated cloud's build, the sandbox's: moto
boots nothing, so no image ever reports its packages) writes the inventory the stack's
pins promise into the build folder as ``image/inventory.json``, and the SBOM made from it
says so in ``metadata.properties`` (``imagectl:inventory-source``). From the pins alone:

- the distribution (``os.distro``/``os.release``) and the cloud's pinned kernel, with its
  ``linux-image-<kernel>`` package;
- every package the image must carry at its pin (``image_expectations``: the NVIDIA
  packages of images/compat/packages.yaml, and the stack's own);
- the NVIDIA kernel modules at the driver's version (open or proprietary licence);
- the validator's Python packages for the distribution's Python, as
  ``validators/requirements.lock`` pins them, and imagectl itself.

Two sandbox builds of different pins therefore differ in ``imagectl diff`` exactly where the
pins differ. A provisioned build never gets one: its image reports its own packages.
"""

from __future__ import annotations

import json
from pathlib import Path

import imagectl.validators as validators_package
from imagectl import __version__
from imagectl.core.fsutil import atomic_write
from imagectl.provenance.inventory import IMAGE_FOLDER, INVENTORY_FILE, parse_inventory
from imagectl.stacks.expectations import image_expectations
from imagectl.stacks.resolve import ResolvedStack
from imagectl.supply.lockfile import load as load_lock
from imagectl.supply.targets import DISTRO_PYTHON

SOURCE_PROPERTY = "imagectl:inventory-source"
SOURCE_VALUE = "stand-in from the stack's pins (--skip-provisioning): nothing was provisioned"
# the NVIDIA driver's kernel modules (the manifest role reads the same names with modinfo)
MODULES = ("nvidia", "nvidia-modeset", "nvidia-uvm", "nvidia-drm", "nvidia-peermem")


def pins_inventory(resolved: ResolvedStack, cloud: str, lock: Path) -> dict[str, object]:
    """The inventory document (``imagectl.provenance.inventory``) the pins promise."""
    stack = resolved.stack
    expect = image_expectations(resolved, cloud)
    kernel = expect.kernel or "unknown"
    debs = {**expect.packages}
    if expect.kernel:
        debs[f"linux-image-{expect.kernel}"] = expect.kernel
    python = DISTRO_PYTHON.get(f"{stack.os.distro}-{stack.os.release}", "3.10")
    locked = load_lock(lock).entries if lock.is_file() else ()
    py = [{"name": e.name, "version": e.version} for e in locked if e.applies_to(python)]
    py.append({"name": "imagectl", "version": __version__})
    driver = expect.driver
    modules = (
        [
            {
                "name": name,
                "version": driver,
                "license": "Dual MIT/GPL" if expect.kernel_modules == "open" else "NVIDIA",
            }
            for name in MODULES
        ]
        if driver
        else []
    )
    return {
        "schema_version": 1,
        "kernel": kernel,
        "os": {"id": stack.os.distro, "version_id": stack.os.release},
        "dpkg": [
            {"name": n, "version": v, "source": n, "source_version": v, "arch": "amd64"}
            for n, v in sorted(debs.items())
        ],
        "python": sorted(py, key=lambda p: p["name"].lower()),
        "kernel_modules": modules,
    }


def validator_lock(workspace_lock: Path) -> Path:
    """The validator's lock: the workspace's, else the one installed with imagectl (a
    workspace that is only images/, as the tests' copies are)."""
    if workspace_lock.is_file():
        return workspace_lock
    return Path(validators_package.__file__).parent / workspace_lock.name


def write_stand_in(folder: Path, resolved: ResolvedStack, cloud: str, lock: Path) -> Path:
    """``<build folder>/image/inventory.json`` from the pins (checked as any inventory)."""
    text = json.dumps(pins_inventory(resolved, cloud, validator_lock(lock)), indent=2) + "\n"
    path = folder / IMAGE_FOLDER / INVENTORY_FILE
    parse_inventory(text, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, text)


def mark_stand_in(sbom_text: str) -> str:
    """The SBOM says where its inventory came from (a scanner's reader sees it)."""
    doc = json.loads(sbom_text)
    metadata = doc.setdefault("metadata", {})
    props = metadata.setdefault("properties", [])
    props.append({"name": SOURCE_PROPERTY, "value": SOURCE_VALUE})
    return json.dumps(doc, indent=2) + "\n"
