"""The whole local pipeline for real: debootstrap base, Packer qemu + site.yml, QEMU boot,
validation over SSH, catalog records and promotion into the local registry.

Marked ``e2e`` (``make test`` runs these after the parallel suite, alone on the
machine: an emulated guest must not compete with the unit suite's workers for two cores). Needs
root, debootstrap, qemu-system-x86_64, qemu-img, packer, ansible-playbook and the Debian
archive; a missing tool skips, or fails under CI=true. The base
image and the candidate are cached in one state folder for the whole module
(``IMAGECTL_E2E_STATE_DIR`` keeps it between sessions): the fault run reuses the
candidate the first run built, so it costs a boot and a validation, not a build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_local as _run
from needs import require

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("local")]


def _catalog(state: Path):
    os.environ["IMAGECTL_STATE_DIR"] = str(state)
    from imagectl.catalog.db import open_catalog

    return open_catalog()


def test_run_promotes_the_image_to_every_local_region(promoted_run, e2e_state: Path):
    code, data, err = promoted_run
    assert code == 0, f"{data.get('error')}\n{err[-3000:]}"
    assert data["outcome"] == "promoted"
    assert data["verdict"] == "pass" and data["failing_checks"] == []
    assert data["regions_reached"] == ["local-a", "local-b", "local-c"]
    image_id = data["image_id"]
    assert image_id.startswith("sha256:")
    registry = e2e_state / "registry"
    for region in ("local-a", "local-b", "local-c"):
        latest = (registry / region / "stacks" / "local" / "latest").read_text().strip()
        assert latest == image_id
        files = list((registry / region / "images").glob(image_id.split(":")[1] + ".*"))
        assert any(f.suffix == ".qcow2" for f in files)
    # Live progress named every step with its duration.
    titles = ("Base image", "Provision: playbooks/site.yml natively in a chroot",
              "Build: packer qemu", "Register candidate in local-a",
              "Validate: boot the candidate in QEMU", "Promote")  # fmt: skip
    for title in titles:
        assert title in err
    assert set(data["timings"]) >= {
        "base", "provision", "build", "import", "validate", "attest", "promote"
    }  # fmt: skip
    # The validation went through validate-image's stage: an instance of the local cloud
    # was launched (a QEMU VM), validated over SSH by playbooks/validate.yml, terminated.
    validation = data["validation"]
    assert validation["state"] == "validated" and validation["cloud"] == "local"
    (launched,) = validation["launched"]
    assert validation["terminated"] == [launched["instance_id"]]
    assert "Run the validator" in err and "Fetch the receipt" in err
    assert list((e2e_state / "registry" / "instances").glob("*")) == []


def test_the_run_signed_an_attestation_that_verifies_with_the_state_key(promoted_run, e2e_state):
    """make run signs with the state folder's key and verifies before promoting; a
    verifier holding only the exported public key accepts the promoted image."""
    _code, data, _err = promoted_run
    assert data["attestation"].startswith("sha256-")
    key = e2e_state / "keys" / "attestation.pem"
    assert key.stat().st_mode & 0o777 == 0o600
    trust = e2e_state / "keys" / "attestation.pub.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env.update(IMAGECTL_STATE_DIR=str(e2e_state), IMAGECTL_ATTESTATION_TRUST=str(trust))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "imagectl"), "--root", str(REPO), "verify",
         data["image_id"], "--stack", "local", "--cloud", "local", "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["digest"] == data["attestation"]


def test_the_receipt_passes_and_is_bound_to_the_image(promoted_run):
    _code, data, _err = promoted_run
    receipt = json.loads(Path(data["receipt"]).read_text())
    assert receipt["image_id"] == data["image_id"]
    assert receipt["verdict"] == "pass" and receipt["profile"] == "boot"
    assert receipt["stack"] == "local"
    ids = {c["id"] for c in receipt["checks"]}
    assert "sw.packages.held" in ids and "sw.packages.pinned" in ids, ids
    assert {"image.ssh_host_keys", "image.build_keys"} <= ids, ids
    assert all(c["outcome"] in ("pass", "skip") for c in receipt["checks"])


def test_the_catalog_holds_build_image_receipt_promotion_and_pointers(promoted_run, e2e_state):
    _code, data, _err = promoted_run
    from imagectl.catalog import repository as repo

    catalog = _catalog(e2e_state)
    with catalog.transaction() as s:
        rows = [i for i in repo.list_images(s, stack="local", cloud="local")
                if i.cloud_image_id == data["image_id"]]  # fmt: skip
        assert {r.region for r in rows} == {"local-a", "local-b", "local-c"}
        assert all(r.state == "promoted" for r in rows)
        source = next(r for r in rows if r.region == "local-a")
        assert source.build is not None and source.build.build_id == data["build_id"]
        assert source.build.outcome == "succeeded"
        runs = repo.receipts(s, source)
        assert len(runs) == 1 and runs[0].verdict == "pass"
        assert runs[0].receipt["image_id"] == data["image_id"]
        for region in ("local-a", "local-b", "local-c"):
            pointer = repo.get_pointer(s, "local", "local", region)
            assert pointer is not None and pointer.image.cloud_image_id == data["image_id"]
        kinds = {e.kind for e in repo.events(s, stack="local")}
    assert {"build.started", "build.succeeded", "validation.receipt", "pointer.set"} <= kinds
    # The status view was part of the run's output.
    assert data["status"][0]["stack"] == "local"


# One fault boots a guest here (about a minute under TCG): ssh-host-key, the one only a
# booted image can judge (the boot makes host keys itself; the validator tells a baked
# key from them by its age). unheld-package is proven without a boot: the fault on a
# disk (test_faults.py) and sw.packages.held on dpkg's state (tests/snapshots cases).
@pytest.mark.parametrize("fault", ["ssh-host-key"])
def test_an_injected_fault_is_blocked_with_the_failing_check_named(
    promoted_run, e2e_state: Path, fault: str
):
    first_code, first, _ = promoted_run
    require(first_code == 0, "the promoted run failed; its candidate is needed here")
    code, data, err = _run(e2e_state, "--inject-fault", fault)
    assert code == 1, err[-3000:]
    assert data["outcome"] == "blocked"
    assert data["candidate_reused"] is True and data["build_id"] == first["build_id"]
    assert data["verdict"] == "fail" and data["regions_reached"] == []
    names = " ".join(f"{c['name']} {c['title']} {c['message']}" for c in data["failing_checks"])
    assert data["fault"]["expected_check"] in names.lower(), names
    assert data["image_id"] != first["image_id"]
    # Nothing moved: every region still points at the promoted image.
    for region in ("local-a", "local-b", "local-c"):
        latest = e2e_state / "registry" / region / "stacks" / "local" / "latest"
        assert latest.read_text().strip() == first["image_id"]
    from imagectl.catalog import repository as repo

    with _catalog(e2e_state).transaction() as s:
        row = repo.find_image(s, "local", "local-a", data["image_id"])
        assert row is not None and row.state == "blocked"
        assert data["failing_checks"][0]["name"] in (row.blocked_reason or "")


# Two versions of tzdata (Priority: required, no exact-version dependencies) that Debian 12
# serves at once: bookworm (point release) and bookworm-security. A stack that pins one of
# them differs from the repository's local stack by exactly that one pinned package.
TZDATA = ("2026b-0+deb12u1", "2026f-0+deb12u1")


def test_a_build_differing_by_one_pin_diffs_as_exactly_that_change(
    promoted_run, e2e_state: Path, tmp_path: Path
):
    """Two real local builds (the session's run, and `imagectl build --cloud local` from a
    copy of the workspace whose stack pins tzdata), each with its SBOM from the image's
    own dpkg: `imagectl diff` between them shows the one pinned package and nothing else."""
    _code, first, _err = promoted_run
    with _catalog(e2e_state).transaction() as s:
        from imagectl.catalog import repository as repo

        (image,) = [i for i in repo.list_images(s, stack="local", region="local-a")
                    if i.cloud_image_id == first["image_id"]]  # fmt: skip
        row = repo.sbom_of(s, image)
        assert row is not None, "the first build recorded no SBOM"
        before = {p["name"]: p["version"] for p in row.inventory["dpkg"]}["tzdata"]
    pin = TZDATA[1] if before != TZDATA[1] else TZDATA[0]
    ws = tmp_path / "ws"
    shutil.copytree(REPO, ws, ignore=shutil.ignore_patterns(
        ".venv", ".git", "node", "build", "__pycache__", "*.egg-info"))  # fmt: skip
    stack = ws / "images" / "stacks" / "local.yaml"
    text = stack.read_text()
    stack.write_text(text.replace("    packages:\n", f'    packages:\n      tzdata: "{pin}"\n'))
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env.update(IMAGECTL_STATE_DIR=str(e2e_state), COLUMNS="160")
    imagectl = str(Path(sys.executable).parent / "imagectl")
    proc = subprocess.run(  # the build stage alone: its SBOM is what the diff reads
        [imagectl, "--root", str(ws), "build", "--stack", "local", "--cloud", "local",
         "--json"],
        capture_output=True, text=True, env=env, timeout=2400, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    second = json.loads(proc.stdout)
    assert second["sbom"] and Path(second["sbom"]).is_file()
    (image,) = second["images"]
    assert image["state"] == "built"
    proc = subprocess.run(
        [imagectl, "--root", str(ws), "diff", first["image_id"], image["image_id"],
         "--stack", "local", "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["changes"] == [
        {"section": "pinned", "kind": "changed", "name": "tzdata", "old": before, "new": pin}
    ]
