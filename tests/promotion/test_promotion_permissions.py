"""Promotion, rollback, retention and drift's reads run under exactly the shipped
permission documents (images/permissions/<cloud>/{promote,readonly}.*), enforced by each
emulator (tests/fakes/permissions.py): the full document passes, every entry of it is
needed, and a document missing any one permission fails the run naming that permission.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from imagectl.catalog import repository as repo
from imagectl.promotion import promote, rollback
from imagectl.promotion.retention import apply_retention
from tests.contract.call_inventory import off_the_happy_path
from tests.fakes import permissions as perm

# Granted for what the h100-training stack does not configure on that emulator run.
ONLY_WHEN_SHARING = {
    "gcp": {"compute.images.setIamPolicy"},  # share.principals
    "azure": {"Microsoft.Compute/galleries/share/action"},  # share.principals
    "aws": set(),
}
# Exercised by these runs although an option reaches it (h100-training shares on AWS)
RUN_HERE = {"aws": {"ec2:ModifyImageAttribute"}, "gcp": set(), "azure": set()}


def _not_run(cloud: str) -> set[str]:
    """Granted for calls only a failure or an option these runs do not make reaches
    (retention's deletes, public sharing, encrypted copies): held by the call inventory
    instead (tests/contract/test_call_inventory.py)."""
    return off_the_happy_path(cloud, "promote") - RUN_HERE[cloud] - ONLY_WHEN_SHARING[cloud]


@contextlib.contextmanager
def enforced(cloud: Any, monkeypatch: pytest.MonkeyPatch, doc: Any) -> Iterator[perm.Enforcer]:
    """Every call of the block answered as the cloud answers the holder of ``doc``."""
    if cloud.cloud == "aws":
        with perm.aws_enforced(monkeypatch, cloud.endpoint, doc) as enforcer:
            yield enforcer
        return
    if cloud.cloud == "gcp":
        enforcer = perm.enforce_gcp(cloud.fake, perm.granted("gcp", doc))
    else:
        enforcer = perm.enforce_arm(cloud.fake, doc["Actions"], doc["NotActions"])
    try:
        yield enforcer
    finally:
        cloud.fake.authorize = None


def _promote(cloud: Any, image: Any) -> str:
    result = promote(cloud.catalog, cloud.provider(), cloud.resolved, image.id, poll_s=0.01,
                     retention=False)  # fmt: skip
    return f"{result.state}: {result.regions!r}"


def _pointers(cloud: Any) -> dict[str, str]:
    with cloud.catalog.transaction() as s:
        pointers = repo.list_pointers(s, stack="h100-training", cloud=cloud.cloud)
        return {p.region: p.image.cloud_image_id for p in pointers}


def _lifecycle(cloud: Any, images: list[Any]) -> str:
    """Promote the last image, roll it back, apply retention: what went wrong, or ''."""
    outcome = _promote(cloud, images[-1])
    if not outcome.startswith("promoted"):
        return outcome
    provider = cloud.provider()
    back = rollback(cloud.catalog, provider, "h100-training", reason="permission test")
    if set(back.moved) != set(cloud.regions):
        return f"rollback moved {back.moved}"
    kept = apply_retention(cloud.catalog, provider, "h100-training", cloud.cloud, keep_last=1)
    if not kept.deprecated:
        return f"retention deprecated nothing: {kept.skipped}"
    return ""


def _drift_reads(cloud: Any) -> None:
    """The calls `imagectl drift --replicas --fleet` makes (drift/replicas.py, fleet.py)."""
    provider = cloud.provider()
    for region in cloud.regions:
        assert provider.get_pointer("h100-training", region) is not None
    provider.list_instances(managed_only=False)


def test_promotion_lifecycle_under_exactly_the_documents(cloud: Any, monkeypatch) -> None:
    images = [cloud.seed() for _ in range(3)]
    doc = perm.load_document(cloud.cloud, "promote")
    with enforced(cloud, monkeypatch, doc) as enforcer:
        for image in images[:-1]:
            assert _promote(cloud, image).startswith("promoted")
        assert _lifecycle(cloud, images) == ""
    assert enforcer.refused == [] and enforcer.unknown == []
    unused = (set(perm.granted(cloud.cloud, doc)) - enforcer.matched
              - ONLY_WHEN_SHARING[cloud.cloud] - _not_run(cloud.cloud))  # fmt: skip
    assert unused == set(), f"{cloud.cloud}/promote grants what no run needed: {sorted(unused)}"

    readonly = perm.load_document(cloud.cloud, "readonly")
    with enforced(cloud, monkeypatch, readonly) as reader:
        _drift_reads(cloud)
    assert reader.refused == [] and reader.unknown == []


def _removals() -> list[Any]:
    cases = []
    for cloud in ("aws", "gcp", "azure"):
        doc = perm.load_document(cloud, "promote")
        for permission in perm.granted(cloud, doc):
            if permission not in ONLY_WHEN_SHARING[cloud] | _not_run(cloud):
                cases.append(pytest.param(cloud, permission, id=f"{cloud}-{permission}"))
    return cases


@pytest.mark.parametrize(("cloud", "permission"), _removals(), indirect=["cloud"])
def test_a_missing_permission_fails_the_run_naming_it(
    cloud: Any, permission: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = [cloud.seed() for _ in range(3)]
    for image in images[:-1]:  # earlier promotions, under the whole document
        assert _promote(cloud, image).startswith("promoted")
    doc = perm.without(cloud.cloud, perm.load_document(cloud.cloud, "promote"), permission)
    before = _pointers(cloud)
    with enforced(cloud, monkeypatch, doc) as enforcer:
        try:
            failure = _lifecycle(cloud, images)
        except Exception as exc:  # a refusal the stage does not turn into a result
            failure = f"{type(exc).__name__}: {exc}"
    assert failure, f"the lifecycle passed without {permission}"
    assert permission in enforcer.refused
    assert permission in failure, failure[-2000:]
    assert before  # the earlier promotion's pointers were there to protect
