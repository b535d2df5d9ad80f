"""The promote / rollback / deprecate / block commands: output, exit codes, status."""

from __future__ import annotations

import pytest

REGIONS = ["local-a", "local-b", "local-c"]


@pytest.fixture
def env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


def test_promote_rollback_and_status(env, cli) -> None:
    first, second = env.validated(), env.validated()
    r = cli("promote", first.cloud_image_id, "--stack", "local")
    assert r.code == 0, r.err
    assert "promoted" in r.out and "flipped in 3 region(s)" in r.out
    for region in REGIONS:
        assert f"{region}: done" in r.out  # live progress, one line per step off a terminal
    r = cli("promote", "--stack", "local", "--json")  # the newest validated image
    assert r.code == 0, r.err
    body = r.json()
    assert body["state"] == "promoted" and body["image_id"] == second.cloud_image_id
    assert body["previous_pointers"] == {region: first.cloud_image_id for region in REGIONS}
    r = cli("status", "--stack", "local", "--json", "--events", "50")
    (entry,) = r.json()["stacks"]
    assert {c["region"]: c["image"]["cloud_image_id"] for c in entry["current"]} == {
        region: second.cloud_image_id for region in REGIONS
    }
    kinds = {e["kind"] for e in entry["events"]}
    assert {"promotion.pointer.flipped", "promotion.region.done", "pointer.set"} <= kinds
    r = cli("rollback", "--stack", "local", "--reason", "regression")
    assert r.code == 0, r.err
    assert f"local-b: latest {second.cloud_image_id} -> {first.cloud_image_id}" in r.out
    r = cli("rollback", "--stack", "local")
    assert r.code == 2
    assert "no earlier promoted image" in r.err


def test_gate_refusal_and_block_exit_1(env, cli) -> None:
    stale = env.validated(age_hours=48)
    r = cli("promote", str(stale.id))
    assert r.code == 1
    assert "48.0 h old" in r.err and "--force --reason" in r.err
    img = env.validated()
    r = cli("block", img.cloud_image_id, "--reason", "kernel panics under load")
    assert r.code == 0 and "blocked" in r.out
    r = cli("promote", img.cloud_image_id)
    assert r.code == 1 and "kernel panics under load" in r.err
    r = cli("promote", img.cloud_image_id, "--force")
    assert r.code == 2 and "needs --reason" in r.err
    r = cli("promote", img.cloud_image_id, "--force", "--reason", "vendor hotfix", "--json")
    assert r.code == 0, r.err
    assert r.json()["forced"] is True
    r = cli("status", "--stack", "local", "--json", "--events", "100")
    forced = [e for e in r.json()["stacks"][0]["events"] if e["kind"] == "promotion.forced"]
    assert len(forced) == 1 and "vendor hotfix" in forced[0]["message"]


def test_partial_promotion_prints_how_to_resume(env, cli, monkeypatch) -> None:
    img = env.validated()
    monkeypatch.setenv("IMAGECTL_LOCAL_FAIL", "local-c=replica")
    r = cli("promote", img.cloud_image_id)
    assert r.code == 1
    assert "partially_promoted" in r.out and "local-c failed" in r.out
    assert "pointer is unchanged" in r.out
    resume = f"imagectl promote {img.cloud_image_id} --stack local --cloud local"
    assert f"resume with: {resume}" in r.out
    monkeypatch.delenv("IMAGECTL_LOCAL_FAIL")
    r = cli(*resume.split()[1:])
    assert r.code == 0, r.err
    assert "(earlier run)" in r.out


def test_bad_input_exit_2(env, cli) -> None:
    assert cli("promote", "sha256:" + "1" * 64).code == 2
    assert cli("promote", "--stack", "nope").code == 2
    img = env.validated()
    r = cli("promote", str(img.id), "--regions", "local-a,mars-1")
    assert r.code == 2 and "mars-1" in r.err
    assert cli("promote").code == 2
    assert cli("block", "999", "--reason", "x").code == 2


def test_dry_run(env, cli) -> None:
    img = env.validated()
    r = cli("promote", str(img.id), "--dry-run")
    assert r.code == 0
    assert "dry run" in r.out and "local-a: latest (none)" in r.out
    assert env.image(img.id).state == "validated"


def test_deprecate_command_refuses_images_in_use(env, cli) -> None:
    old, new = env.validated(), env.validated()
    assert cli("promote", str(old.id)).code == 0
    r = cli("deprecate", old.cloud_image_id)
    assert r.code == 1 and "still in use" in r.err and "latest of local" in r.err
    assert cli("promote", str(new.id)).code == 0
    r = cli("deprecate", old.cloud_image_id, "--reason", "superseded")
    assert r.code == 0, r.err
    assert r.out.count("deprecated ") == 4  # build + three regions
    meta = env.provider().metadata(old.cloud_image_id, "local-b")
    assert meta["state"] == "deprecated"
    # A running instance of the deprecated image keeps it from deletion, like a pointer.
    provider = env.provider()
    image_b = provider.get_image(old.cloud_image_id, "local-b")
    assert image_b is not None
    user = provider.register_instance(image_b, shape="local-vm", tags={})
    r = cli("deprecate", old.cloud_image_id, "--delete", "--reason", "cleanup")
    assert r.code == 1 and "used by running instance" in r.err and user.instance_id in r.err
    assert (env.registry / "local-b" / "images" / (old.cloud_image_id[7:] + ".qcow2")).exists()
    provider.terminate(user)
    r = cli("deprecate", old.cloud_image_id, "--delete", "--reason", "cleanup")
    assert r.code == 0, r.err
    assert not (env.registry / "local-b" / "images" / (old.cloud_image_id[7:] + ".qcow2")).exists()
    assert (env.registry / "local-b" / "images" / (new.cloud_image_id[7:] + ".qcow2")).exists()
    r = cli("deprecate", new.cloud_image_id, "--delete")
    assert r.code == 2 and "Deprecate it first" in r.err


def test_retention_command_with_keep(env, cli) -> None:
    images = [env.validated() for _ in range(2)]
    for img in images:
        assert cli("promote", str(img.id)).code == 0
    r = cli("deprecate", "--stack", "local", "--keep", "1", "--json")
    assert r.code == 0, r.err
    assert sorted(r.json()["deprecated"]) == sorted(
        f"{images[0].cloud_image_id} in {region}" for region in ["build", *REGIONS]
    )
