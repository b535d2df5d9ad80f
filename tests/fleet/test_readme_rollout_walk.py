"""The README's rollout section, walked as written: the commands it tells a
person to type are read from the section itself (``tests/doc_sections.py``: by its heading,
in README.md or, once moved, docs/*.md), its placeholders filled, and run in process
against a store that serves only the Prometheus query API (``tests/fleet/query_store.py``:
404 for anything else, each request's SigV4 signature checked, as Amazon Managed Service
for Prometheus does) with the watcher on, as the section's step 2 says. The fleet behind
the store: ten canary and ten predecessor nodes of one shape, six hours watched each, no
incident: the rollout ends in an advance (latest moves to the candidate in every region)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from imagectl.promotion import promote
from imagectl.rollout.evidence import queries
from imagectl.rollout.policy import load_policy
from tests.doc_sections import section, typed_commands
from tests.fleet.query_store import QueryOnlyStore

HEADING = "Canary and rollout"
SHAPE, NODES = "qemu-tcg", 10
REGIONS = ("local-a", "local-b", "local-c")


def _fill(command: str, values: dict[str, str], optional: set[str]) -> list[str]:
    """``command`` as typed: each placeholder given its value, each ``[--flag ...]`` kept
    when its flag is in ``optional`` (its own placeholder filled too), else dropped."""

    def group(m: re.Match[str]) -> str:
        inner = m.group(1).split()
        return " ".join(values.get(w, w) for w in inner) if inner[0] in optional else ""

    text = re.sub(r"\[([^\]]+)\]", group, command)
    words = shlex.split(text)
    assert words[0].endswith("imagectl"), command
    return [values.get(w, w) for w in words[1:]]


def _vector(rows: list[dict[str, str]], value: str, at: float = 0.0) -> dict[str, Any]:
    result = [{"metric": m, "value": [at, value]} for m in rows]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def _answers(
    stack: str, window_s: int, images: dict[str, str], at: float
) -> dict[str, dict[str, Any]]:
    """What a store holding the fleet's series answers each of the rollout's queries with:
    every node launched, reporting its info series, and looked at by its watcher once a
    minute for the whole window; no exception (failed boot check, drain, bad look) and no
    Xid counter."""
    nodes = [(f"i-{side}-{i:02d}", image) for side, image in images.items() for i in range(NODES)]
    info = [{"instance": f"{n}:9100", "instance_id": n, "image_id": img, "shape": SHAPE}
            for n, img in nodes]  # fmt: skip
    launched = [{"instance": f"{n}:9100", "imagectl_instance_id": n, "imagectl_image_id": img,
                 "imagectl_shape": SHAPE} for n, img in nodes]  # fmt: skip
    inst = [{"instance": f"{n}:9100"} for n, _ in nodes]
    by_key = {k: _vector([], "0", at) for k in queries(stack, window_s, at, load_policy())}
    by_key["info"] = _vector(info, "1", at)
    by_key["launched"] = _vector(launched, str(at), at)  # first scraped now (images are new)
    by_key["looks"] = _vector(inst, str(window_s // 60 + 1), at)
    by_key["passed"], by_key["read_ok"] = _vector(inst, "1", at), _vector(inst, "1", at)
    by_key["xids"] = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    return {queries(stack, window_s, at, load_policy())[k]: v for k, v in by_key.items()}


@pytest.fixture
def watched(world, workspace_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The section's step 2 applied to a copy of the workspace: the setting it names
    (``validation.<key>: <value>``) written into the local stack."""
    from imagectl.stacks import load_resolved

    _, text = section(HEADING)
    key, value = re.search(r"`validation\.(\w+): (\w+)`", text).groups()  # type: ignore[union-attr]
    assert (key, value) == ("watcher", "true"), "the section no longer says how to enable it"
    stack_file = workspace_copy / "images" / "stacks" / "local.yaml"
    body = stack_file.read_text()
    assert "\nvalidation:\n" in body and f"\n  {key}:" not in body
    stack_file.write_text(body.replace("\nvalidation:\n", f"\nvalidation:\n  {key}: {value}\n"))
    _, resolved = load_resolved(workspace_copy / "images", "local")
    assert resolved.stack.validation.watcher
    monkeypatch.setenv("IMAGECTL_ROOT", str(workspace_copy))
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", world.db_url)
    monkeypatch.setenv("IMAGECTL_LOCAL_REGISTRY", str(world.registry))
    return resolved


def test_the_readme_rollout_walk_ends_in_an_advance(world, watched, cli, monkeypatch) -> None:
    path, text = section(HEADING)
    typed = typed_commands(text)
    (canary,) = [c for c in typed if c.split()[1] == "promote" and "--canary" in c.split()]
    (rollout,) = [c for c in typed if c.split()[1] == "rollout"]
    for name in ("IMAGECTL_PROMETHEUS_URL", "IMAGECTL_PROMETHEUS_SIGV4_REGION"):
        assert name in text, f"{path}: the section no longer names {name}"

    # what the section starts from: a predecessor on latest, a validated candidate
    old = world.validated(digest=watched.digest)
    assert promote(world.catalog, world.provider(), watched, old.id).exit_code == 0
    new = world.validated(digest=watched.digest)
    values = {"IMAGE": new.cloud_image_id, "S": "local", "C": "local"}

    r = cli(*_fill(canary, values, set()))
    assert r.code == 0, (canary, r.out + r.err)
    assert "watcher off" not in r.err and "leaves the passive watcher off" not in r.err
    assert world.provider().get_canary_pointer("local", "build") == new.cloud_image_id

    window = 6 * 3600
    images = {"canary": new.cloud_image_id, "old": old.cloud_image_id}
    store: QueryOnlyStore = QueryOnlyStore(
        sigv4=True, answer=lambda q: _answers("local", window, images, store.time)[q]
    )
    try:
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", store.url)
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_SIGV4_REGION", "us-west-2")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", store.KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store.SECRET)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        # the decide job's dry run first, then the act job's run, as the section has them
        dry = cli(*_fill(rollout, values, {"--cloud", "--window", "--json", "--dry-run"}))
        assert dry.code == 0, (rollout, dry.out + dry.err)
        assert dry.json()["decision"] == "advance"
        assert {world.provider().get_pointer("local", g) for g in REGIONS} == {old.cloud_image_id}
        r = cli(*_fill(rollout, values, {"--cloud", "--window", "--json"}))
    finally:
        store.close()
    assert r.code == 0, (rollout, r.out + r.err)
    doc = r.json()
    assert doc["decision"] == "advance" and doc["candidate"] == new.cloud_image_id, doc["reason"]
    (shape,) = doc["shapes"]
    assert shape["canary"]["node_hours"] == pytest.approx(NODES * 6.0)
    assert doc["applied"] == "promote: promoted"
    assert {g: world.provider().get_pointer("local", g) for g in REGIONS} == dict.fromkeys(
        REGIONS, new.cloud_image_id
    )
    # only the query API was asked, every request signed
    assert store.seen and all(h["authorization"].startswith("AWS4-HMAC") for h in store.seen)
