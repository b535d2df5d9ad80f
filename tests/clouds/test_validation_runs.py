"""validate-image end to end on each cloud's protocol fake, with the real validator.

The providers' real SDK clients talk to moto / the Compute REST fake / the ARM fake;
Ansible (ansible-runner) runs playbooks/validate.yml with the documented test-mode
inventory override (every "instance" is this machine, replaying an NVML snapshot), so
the receipts deciding each run come from the real validator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clouds.scenario import HARDWARE_FAULT, HEALTHY, IMAGE_FAULT, write_override
from tests.fakes.fixtures import CloudEnv, launch
from tests.support import ROOT


def _catalog_state(cloud: str, image_id: str) -> tuple[str, int]:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        rows = [r for r in repo.list_images(s, cloud=cloud) if r.cloud_image_id == image_id]
        assert len(rows) == 1
        return str(rows[0].state), len(repo.receipts(s, rows[0]))


def _receipts(cloud: str, image_id: str) -> list[dict[str, Any]]:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        rows = [r for r in repo.list_images(s, cloud=cloud) if r.cloud_image_id == image_id]
        return [dict(run.receipt or {}) for run in repo.receipts(s, rows[0])]


def _validate(cli: Any, env: CloudEnv, image: Any, override: Path, *extra: str) -> Any:
    result = cli(
        "validate-image",
        image.image_id,
        "--cloud",
        env.cloud,
        "--stack",
        "h100-training",
        "--inventory-override",
        str(override),
        "--reach-timeout",
        "2",
        "--json",
        *extra,
    )
    assert result.out, result.err
    return result


def test_healthy_hosts_validate_the_image(cli: Any, cloud_env: CloudEnv, tmp_path: Path) -> None:
    image = cloud_env.seed_candidate()
    result = _validate(
        cli,
        cloud_env,
        image,
        write_override(tmp_path, [HEALTHY, HEALTHY], cloud=cloud_env.cloud),
        "--hosts",
        "2",
    )
    data = result.json()
    assert result.code == 0, result.out
    assert data["verdict"] == "validated" and data["state"] == "validated"
    assert [h["verdict"] for h in data["hosts"]] == ["pass", "pass"]
    assert len(data["launched"]) == 2
    assert sorted(data["terminated"]) == sorted(i["instance_id"] for i in data["launched"])
    assert cloud_env.live_instances() == []
    assert _catalog_state(cloud_env.cloud, image.image_id) == ("validated", 2)
    tagged = cloud_env.provider().get_image(image.image_id, image.region)
    assert tagged.tags["imagectl:state"] == "validated"
    # The hosts judged the image by the controller's expectations for this stack on this
    # shape, shipped as --expect: the same object the image's own expect.json is made of,
    # never a stack resolved on the host nor the snapshot's recorded expect.json.
    from imagectl.stacks import load_resolved
    from imagectl.stacks.expectations import for_shape, image_expectations

    _, resolved = load_resolved(ROOT / "images", "h100-training")
    shape = resolved.stack.clouds.enabled()[cloud_env.cloud].validation_shapes[0]
    want = for_shape(ROOT / "images", resolved, shape).model_dump(mode="json")
    receipts = _receipts(cloud_env.cloud, image.image_id)
    assert len(receipts) == 2
    for receipt in receipts:
        got = receipt["expectations"]
        assert {k: got[k] for k in want} == want
        assert got["packages"] == image_expectations(resolved, cloud_env.cloud).packages


def test_throttling_is_retried_then_succeeds(cli: Any, cloud_env: CloudEnv, tmp_path: Path) -> None:
    image = cloud_env.seed_candidate()
    cloud_env.throttle(2)
    data = _validate(
        cli, cloud_env, image, write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud)
    ).json()
    assert data["verdict"] == "validated", data
    assert cloud_env.throttled() == 2
    assert cloud_env.live_instances() == []


def test_capacity_error_in_one_zone_launches_in_the_next(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    image = cloud_env.seed_candidate()
    first, second = cloud_env.locations()[:2]
    cloud_env.capacity_error(first)
    data = _validate(
        cli, cloud_env, image, write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud)
    ).json()
    assert data["verdict"] == "validated", data
    assert [i["location"] for i in data["launched"]] == [second]
    assert cloud_env.live_instances() == []


def test_capacity_everywhere_is_inconclusive_never_blocked(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    image = cloud_env.seed_candidate()
    for location in cloud_env.locations():
        cloud_env.capacity_error(location)
    result = _validate(
        cli, cloud_env, image, write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud)
    )
    data = result.json()
    assert result.code == 1
    assert data["verdict"] == "inconclusive" and data["state"] == "inconclusive"
    assert "no capacity" in data["reasons"][0]
    assert data["launched"] == []
    assert _catalog_state(cloud_env.cloud, image.image_id) == ("inconclusive", 0)


def test_quota_error_is_inconclusive(cli: Any, cloud_env: CloudEnv, tmp_path: Path) -> None:
    image = cloud_env.seed_candidate()
    cloud_env.quota_error()
    result = _validate(
        cli, cloud_env, image, write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud)
    )
    data = result.json()
    assert result.code == 1
    assert data["verdict"] == "inconclusive", data
    assert "quota" in data["reasons"][0].lower()
    assert cloud_env.live_instances() == []


def test_unreachable_instance_is_inconclusive_and_terminated(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    image = cloud_env.seed_candidate()
    cloud_env.never_running()
    result = _validate(
        cli, cloud_env, image, write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud)
    )
    data = result.json()
    assert data["verdict"] == "inconclusive", data
    assert data["hosts"][0]["problem"].startswith("unreachable")
    assert len(data["launched"]) == 1
    assert data["terminated"] == [data["launched"][0]["instance_id"]]
    assert cloud_env.live_instances() == []


def test_validator_crash_is_inconclusive(cli: Any, cloud_env: CloudEnv, tmp_path: Path) -> None:
    image = cloud_env.seed_candidate()
    broken = tmp_path / "truncated-snapshot.json"
    broken.write_text(HEALTHY.read_text()[:500])
    data = _validate(
        cli, cloud_env, image, write_override(tmp_path, [broken], cloud=cloud_env.cloud)
    ).json()
    assert data["verdict"] == "inconclusive", data
    assert "validator crashed" in data["hosts"][0]["problem"]
    assert _catalog_state(cloud_env.cloud, image.image_id) == ("inconclusive", 0)
    assert cloud_env.live_instances() == []


def test_receipt_naming_another_image_is_rejected(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    image = cloud_env.seed_candidate()
    other = {"validate_snapshot": str(HEALTHY), "validate_image_id": "some-other-image"}
    data = _validate(
        cli, cloud_env, image, write_override(tmp_path, [other], cloud=cloud_env.cloud)
    ).json()
    assert data["verdict"] == "inconclusive", data
    assert "receipt rejected" in data["hosts"][0]["problem"]
    assert "some-other-image" in data["hosts"][0]["problem"]
    assert _catalog_state(cloud_env.cloud, image.image_id) == ("inconclusive", 0)


def test_faulty_host_among_healthy_is_retried_not_blocked(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    image = cloud_env.seed_candidate()
    override = write_override(tmp_path, [HEALTHY, HARDWARE_FAULT, HEALTHY], cloud=cloud_env.cloud)
    data = _validate(cli, cloud_env, image, override, "--hosts", "2").json()
    assert data["verdict"] == "validated", data
    assert data["rounds"] == 2
    assert len(data["launched"]) == 3  # two, then one fresh host for the faulty one
    bad = data["bad_hosts"]
    assert [b["host"] for b in bad] == [data["launched"][1]["instance_id"]]
    assert bad[0]["hardware"] == ["kernel.xid"]
    assert cloud_env.live_instances() == []
    assert _catalog_state(cloud_env.cloud, image.image_id)[0] == "validated"


def test_image_fault_on_every_host_blocks(cli: Any, cloud_env: CloudEnv, tmp_path: Path) -> None:
    image = cloud_env.seed_candidate()
    override = write_override(tmp_path, [IMAGE_FAULT, IMAGE_FAULT], cloud=cloud_env.cloud)
    result = _validate(cli, cloud_env, image, override, "--hosts", "2")
    data = result.json()
    assert result.code == 1
    assert data["verdict"] == "blocked" and data["state"] == "blocked", data
    assert any(r.startswith("sw.driver.version") for r in data["reasons"])
    assert data["rounds"] == 1 and data["bad_hosts"] == []
    assert _catalog_state(cloud_env.cloud, image.image_id) == ("blocked", 2)
    assert cloud_env.live_instances() == []


def test_interrupted_run_terminates_its_instances(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    """SIGINT arrives while the run waits for its instance: the instance is terminated."""
    import os
    import signal
    import threading
    import time

    image = cloud_env.seed_candidate()
    cloud_env.never_running()
    provider = cloud_env.provider()
    stop = threading.Event()

    def interrupt_when_launched() -> None:
        while not stop.is_set():
            if provider.list_instances(managed_only=True):
                time.sleep(0.2)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=interrupt_when_launched, daemon=True)
    watcher.start()
    try:
        result = cli(
            "validate-image",
            image.image_id,
            "--cloud",
            cloud_env.cloud,
            "--stack",
            "h100-training",
            "--inventory-override",
            str(write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud)),
            "--reach-timeout",
            "60",
            "--json",
        )
    finally:
        stop.set()
        watcher.join(5)
    assert result.code == 130
    assert cloud_env.live_instances() == []
    assert _catalog_state(cloud_env.cloud, image.image_id) == ("inconclusive", 0)


def test_reaper_terminates_only_expired_instances(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    import datetime as dt

    image = cloud_env.seed_candidate()
    provider = cloud_env.provider()
    location = cloud_env.locations()[0]

    def launched(ttl: dt.timedelta) -> str:
        shape = "p5.48xlarge" if cloud_env.cloud == "aws" else "x"
        return str(launch(provider, image, shape, location, ttl=ttl).instance_id)

    expired = launched(dt.timedelta(hours=-1))
    alive = launched(dt.timedelta(hours=2))
    dry = cli("reap", "--cloud", cloud_env.cloud, "--stack", "h100-training", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert [(r["instance_id"], r["action"]) for r in dry.json()["instances"]] == [
        (expired, "would-terminate")
    ]
    assert cloud_env.live_instances() == sorted([expired, alive])
    real = cli("reap", "--cloud", cloud_env.cloud, "--stack", "h100-training", "--json")
    assert real.code == 0, real.err
    assert [(r["instance_id"], r["action"]) for r in real.json()["instances"]] == [
        (expired, "terminated")
    ]
    assert cloud_env.live_instances() == [alive]


def test_reaper_reports_an_instance_once_however_many_stacks_list_it(
    cli: Any, cloud_env: CloudEnv
) -> None:
    """Stacks that share an account are swept through each of them (their provider
    options differ in regions or zones); an expired instance is still one line, and a
    rerun after the sweep finds nothing."""
    import datetime as dt

    image = cloud_env.seed_candidate()
    shape = "p5.48xlarge" if cloud_env.cloud == "aws" else "x"
    location = cloud_env.locations()[0]
    inst = launch(cloud_env.provider(), image, shape, location, ttl=dt.timedelta(hours=-1))
    stacks = [a for name in ("h100-training", "b200-training") for a in ("--stack", name)]
    dry = cli("reap", "--cloud", cloud_env.cloud, *stacks, "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert [(r["instance_id"], r["action"]) for r in dry.json()["instances"]] == [
        (str(inst.instance_id), "would-terminate")
    ]
    first = cli("reap", "--cloud", cloud_env.cloud, *stacks, "--json")
    assert first.code == 0, first.err
    assert [(r["instance_id"], r["action"]) for r in first.json()["instances"]] == [
        (str(inst.instance_id), "terminated")
    ]
    again = cli("reap", "--cloud", cloud_env.cloud, *stacks, "--json")
    assert again.code == 0 and again.json()["instances"] == []


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "::/0"])
def test_ssh_is_never_opened_to_the_world(cloud_env: CloudEnv, cidr: str) -> None:

    from imagectl.core.errors import UserError

    image = cloud_env.seed_candidate()
    with pytest.raises(UserError, match="whole internet"):
        launch(cloud_env.provider(), image, "x", cloud_env.locations()[0], launched_by="t",
               allowed_cidr=cidr)  # fmt: skip
    assert cloud_env.live_instances() == []


def _two_shapes(workspace: Path, tmp_path: Path) -> tuple[Any, Path]:
    """h100-training with a second AWS validation shape, p4de.24xlarge (8x A100 80GB),
    in a copy of the workspace; and the healthy H100 snapshot bound to that stack's digest
    (its pins are h100-training's: only the digest differs)."""
    from imagectl.stacks import load_resolved

    stack = workspace / "images" / "stacks" / "h100-training.yaml"
    text = stack.read_text()
    assert "validation_shapes: [p5.48xlarge]" in text
    stack.write_text(text.replace("validation_shapes: [p5.48xlarge]",
                                  "validation_shapes: [p5.48xlarge, p4de.24xlarge]"))  # fmt: skip
    _, resolved = load_resolved(workspace / "images", "h100-training")
    _, original = load_resolved(ROOT / "images", "h100-training")
    snapshot = tmp_path / "h100-two-shapes.json"
    snapshot.write_text(HEALTHY.read_text().replace(original.digest, resolved.digest))
    return resolved, snapshot


def test_every_validation_shape_of_the_stack_is_validated(
    cli: Any, aws_moto: Any, workspace_copy: Path, tmp_path: Path
) -> None:
    """A stack validating on p5.48xlarge (H100) and p4de.24xlarge (A100): without --shape,
    validate-image validates both. Every host replays a healthy H100: the p5 host passes,
    the p4de host is judged against A100 expectations and fails, so the image is not
    validated, and the catalog holds a receipt of each shape."""
    resolved, snapshot = _two_shapes(workspace_copy, tmp_path)
    env = CloudEnv("aws", aws_moto, resolved=resolved)
    image = env.seed_candidate()
    result = cli("--root", str(workspace_copy), "validate-image", image.image_id, "--cloud",
                 "aws", "--stack", "h100-training", "--inventory-override",
                 str(write_override(tmp_path, [], default=snapshot)), "--max-retries", "0",
                 "--reach-timeout", "2", "--json")  # fmt: skip
    data = result.json()
    assert result.code == 1, result.err
    assert data["shape"] == "p5.48xlarge, p4de.24xlarge"
    assert data["state"] != "validated"
    by_shape = {h["shape"]: h["verdict"] for h in data["hosts"]}
    assert by_shape == {"p5.48xlarge": "pass", "p4de.24xlarge": "fail"}
    assert all(r.startswith("p4de.24xlarge: ") for r in data["reasons"]), data["reasons"]
    assert env.live_instances() == []
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        (row,) = [r for r in repo.list_images(s, cloud="aws") if r.cloud_image_id == image.image_id]
        assert sorted(run.shape for run in repo.receipts(s, row)) == [
            "p4de.24xlarge", "p5.48xlarge"
        ]  # fmt: skip


def test_an_image_validated_on_one_shape_is_not_promoted(
    cli: Any, aws_moto: Any, workspace_copy: Path, tmp_path: Path
) -> None:
    """--shape validates one shape; the gate then refuses the image until the stack's
    other shape has its own passing receipt."""
    resolved, snapshot = _two_shapes(workspace_copy, tmp_path)
    env = CloudEnv("aws", aws_moto, resolved=resolved)
    image = env.seed_candidate()
    # no --sandbox: moto in process has no endpoint this code can see, so it is a real
    # cloud to it (tests/promotion/test_sandbox_real_cloud.py); the gate refuses these
    # replays too, and still names the missing shape
    result = cli("--root", str(workspace_copy), "validate-image", image.image_id, "--cloud",
                 "aws", "--stack", "h100-training", "--shape", "p5.48xlarge",
                 "--inventory-override", str(write_override(tmp_path, [], default=snapshot)),
                 "--reach-timeout", "2", "--json")  # fmt: skip
    assert result.code == 0, result.out + result.err
    assert result.json()["state"] == "validated"
    promoted = cli("--root", str(workspace_copy), "promote", image.image_id, "--stack",
                   "h100-training", "--cloud", "aws", "--json")  # fmt: skip
    assert promoted.code == 1, promoted.out + promoted.err
    assert "no receipt for validation shape p4de.24xlarge" in promoted.out + promoted.err


@pytest.mark.parametrize("cloud_env", ["aws"], indirect=True)
def test_a_snapshot_reaches_the_validator_as_its_bytes(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    """validate.yml sends the snapshot on the validator's standard input through Ansible's
    templating: what a host recorded (here a hostname written as template syntax, as a
    hostile host could) reaches the validator as text, never evaluated."""
    import json

    marker = tmp_path / "evaluated"
    hostile = (
        "{{ lookup('ansible.builtin.pipe', 'touch " + str(marker) + "') }}"
        "{% raw %}{{ 7 * 7 }}{% endraw %}\\n'\"$(id)"
    )
    snap = json.loads(HEALTHY.read_text())
    snap["host"]["hostname"] = hostile
    path = tmp_path / "hostile-hostname.json"
    path.write_text(json.dumps(snap))
    image = cloud_env.seed_candidate()
    result = _validate(
        cli, cloud_env, image, write_override(tmp_path, [path], cloud=cloud_env.cloud)
    )
    assert result.code == 0, result.out
    (receipt,) = _receipts(cloud_env.cloud, image.image_id)
    assert receipt["host"]["hostname"] == hostile
    assert not marker.exists()
