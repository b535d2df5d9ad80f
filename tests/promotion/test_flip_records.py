"""The pointer flip recorded per region and cloud (``pointer_flips``): a flip that fails
half way leaves every region's catalog pointer true to the cloud, shows in ``status``,
is finished by a re-run, and is undone (never rolled back one image too far) by
``rollback``. AWS on a moto server; one region's ``PutParameter`` is refused with SSM's
own error (``AccessDeniedException``, the answer to a role without ssm:PutParameter
there), injected at botocore's send step."""

from __future__ import annotations

import json

from botocore.awsrequest import AWSResponse

from imagectl.catalog import repository as repo
from imagectl.promotion import promote, rollback


class _Raw:
    def __init__(self, body: bytes):
        self.body = body

    def stream(self, **_kw):
        yield self.body

    def read(self, *_a):
        return self.body


def _refuse_pointer(provider, region: str) -> None:
    def deny(request, **_kw):
        body = {"__type": "AccessDeniedException", "message": f"not allowed in {region}"}
        return AWSResponse(request.url, 400, {}, _Raw(json.dumps(body).encode()))

    provider.clients.ssm(region).meta.events.register("before-send.ssm.PutParameter", deny)


def _catalog(env) -> dict[str, str]:
    with env.catalog.transaction() as s:
        return {
            p.region: p.image.cloud_image_id
            for p in repo.list_pointers(s, stack="h100-training", cloud="aws")
        }


def _cloud(env, provider) -> dict[str, str | None]:
    return {r: provider.get_pointer("h100-training", r) for r in env.regions}


def _promote(env, img, provider=None):
    return promote(
        env.catalog, provider or env.provider(), env.resolved, img.id, poll_s=0.01, retention=False
    )


def _half_flip(env):
    """Two promoted images, then a third whose flip fails in the last region."""
    first, second, third = env.seed(), env.seed(), env.seed()
    for img in (first, second):
        assert _promote(env, img).state == "promoted"
    before = _catalog(env)
    provider = env.provider()
    bad = env.regions[-1]
    _refuse_pointer(provider, bad)
    try:
        _promote(env, third, provider)
    except Exception as exc:  # the flip's failure propagates; the promotion stays open
        assert "AccessDenied" in str(exc)
    else:
        raise AssertionError("the refused pointer did not fail the promotion")
    return second, third, before, bad


def test_a_half_done_flip_is_recorded_per_region_and_finished_by_a_rerun(cloud_aws) -> None:
    env = cloud_aws
    _second, third, before, bad = _half_flip(env)
    after = _catalog(env)
    cloud = _cloud(env, env.provider())
    assert after[bad] == before[bad] == cloud[bad]  # never moved
    for region in env.regions:
        assert after[region] == cloud[region], region  # the catalog is true to the cloud
        if region != bad:
            assert after[region] != before[region]
    with env.catalog.transaction() as s:
        latest = max(f.promotion_id for f in repo.flips(s, stack="h100-training", cloud="aws"))
        states = {f.region: f.state for f in repo.flips(s, promotion_id=latest)}
        assert states == {r: ("pending" if r == bad else "done") for r in env.regions}
        assert list(repo.half_done_flips(s, stack="h100-training", cloud="aws"))

    from imagectl.promotion.query import catalog_status

    (entry,) = catalog_status(env.catalog, stack="h100-training", cloud="aws", events=0)
    flip = entry["unfinished_flip"]
    assert flip["pending"] == [bad] and sorted(flip["done"]) == sorted(env.regions[:-1])
    assert flip["finish"].startswith(f"imagectl promote {third.cloud_image_id}")

    done = _promote(env, third)  # the re-run finishes the pending region only
    assert done.state == "promoted", done.regions
    assert _catalog(env) == _cloud(env, env.provider())
    with env.catalog.transaction() as s:
        assert not repo.half_done_flips(s, stack="h100-training", cloud="aws")
    (entry,) = catalog_status(env.catalog, stack="h100-training", cloud="aws", events=0)
    assert entry["unfinished_flip"] is None
    with env.catalog.transaction() as s:
        sets = [e for e in repo.events(s, kind="pointer.set") if e.image_id in _group(s, third)]
        assert sorted(e.details["region"] for e in sets) == sorted(env.regions)


def _group(s, img) -> set[int]:
    from imagectl.promotion.groups import group_rows

    return {r.id for r in group_rows(s, repo.get_image(s, img.id))}


def test_rollback_of_a_half_done_flip_goes_back_one_image_only(cloud_aws) -> None:
    """Regions the failed flip moved go back to the image they named before it; the region
    it never reached stays. Before, rollback read the catalog's (unmoved) pointers and
    sent every region to the image before that: one image too far."""
    env = cloud_aws
    _second, third, before, _bad = _half_flip(env)
    provider = env.provider()
    result = rollback(env.catalog, provider, "h100-training", reason="bad flip")
    assert _catalog(env) == before
    assert _cloud(env, provider) == before
    assert set(result.moved) == set(env.regions[:-1])
    with env.catalog.transaction() as s:
        assert repo.get_image(s, third.id).state == "validated"
        assert {f.state for f in repo.flips(s, stack="h100-training", cloud="aws")} == {
            "done",
            "undone",
        }
