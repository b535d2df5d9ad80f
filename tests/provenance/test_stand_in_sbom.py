"""The sandbox's build records an SBOM: a ``--skip-provisioning`` build
writes the inventory the stack's pins promise and the SBOM says it is a stand-in. The whole path
(moto, Packer, diff, status) runs in ``tests/clouds/test_aws_moto_server_e2e.py``."""

from __future__ import annotations

import json
from pathlib import Path

from imagectl.building.stand_in import (
    SOURCE_PROPERTY,
    SOURCE_VALUE,
    mark_stand_in,
    pins_inventory,
    write_stand_in,
)
from imagectl.provenance.inventory import parse_inventory
from imagectl.provenance.sbom import check_sbom, render_sbom
from imagectl.stacks import load_resolved
from imagectl.stacks.expectations import image_expectations
from imagectl.supply.lockfile import load
from tests.support import REPO

LOCK = REPO / "validators" / "requirements.lock"


def test_the_stand_in_is_what_the_pins_promise() -> None:
    _, resolved = load_resolved(REPO / "images", "h100-training")
    expect = image_expectations(resolved, "aws")
    inv = parse_inventory(json.dumps(pins_inventory(resolved, "aws", LOCK)), "stand-in")
    debs = {p.name: p.version for p in inv.dpkg}
    for name, pin in expect.packages.items():
        assert debs[name] == pin
    assert debs[f"linux-image-{expect.kernel}"] == expect.kernel
    assert inv.kernel == expect.kernel
    assert inv.os is not None and (inv.os.id, inv.os.version_id) == ("ubuntu", "22.04")
    assert {m.name: m.version for m in inv.kernel_modules}["nvidia"] == expect.driver
    py = {p.name for p in inv.python}
    locked = {e.name for e in load(LOCK).entries if e.applies_to("3.10")}
    assert py == locked | {"imagectl"}
    assert "pytest" not in py  # the lean image (item 9)


def test_the_sbom_says_it_is_a_stand_in_and_stays_valid(tmp_path: Path) -> None:
    _, resolved = load_resolved(REPO / "images", "h100-training")
    path = write_stand_in(tmp_path, resolved, "aws", LOCK)
    assert path == tmp_path / "image" / "inventory.json"
    inv = parse_inventory(path.read_text(), str(path))
    text = render_sbom(inv, stack="h100-training", stack_digest=resolved.digest, cloud="aws",
                       build_id="b-1", distro="ubuntu")  # fmt: skip
    marked = mark_stand_in(text)
    check_sbom(marked, where="the marked SBOM")
    props = json.loads(marked)["metadata"]["properties"]
    assert {"name": SOURCE_PROPERTY, "value": SOURCE_VALUE} in props


def test_two_pin_sets_differ_where_the_pins_differ() -> None:
    _, h100 = load_resolved(REPO / "images", "h100-training")
    _, l4 = load_resolved(REPO / "images", "inference-l4-a10g")
    a = pins_inventory(h100, "aws", LOCK)
    b = pins_inventory(l4, "aws", LOCK)
    changed = {p["name"] for p in a["dpkg"]} ^ {p["name"] for p in b["dpkg"]}
    same = {p["name"]: p["version"] for p in a["dpkg"]}
    versions = {p["name"] for p in b["dpkg"] if same.get(p["name"], p["version"]) != p["version"]}
    assert changed or versions  # the stacks pin different things
    assert a["python"] == b["python"]  # the validator is the same
