"""``imagectl reap`` sweeps the placements multi-node runs left (a
runner killed between creating its placement and deleting it leaves it behind).

On each cloud's protocol fake, through the providers' real SDK clients: the placement
carries imagectl's marking (AWS and Azure tags, the GCP policy's description), the
provider lists the marked ones with the instances each holds (across the fakes' pages:
Compute's aggregated list pages at 3, ARM's lists at 2; EC2's DescribePlacementGroups does
not page), and the reaper deletes only those past their TTL that hold no instance. Every
cloud refuses to delete a placement in use (EC2 DeletePlacementGroup
``InvalidPlacementGroup.InUse``: "ensure that its instances have been terminated", EC2 API
reference, Error codes; Compute resourcePolicies.delete: 400
``resourceInUseByAnotherResource``; ARM: a proximity placement group a VM references,
"Proximity placement groups"), and the fakes do as well. No VM boots.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3

from imagectl.clouds.common import instance_tags
from imagectl.clouds.placement import Placement
from imagectl.clouds.reap import reap_placements
from imagectl.tags import TAG_MANAGED, TAG_TTL
from imagectl.validation.fabric.nodes import placement_name
from tests.fakes import moto_extensions
from tests.fakes.azure_arm import arm_error
from tests.fakes.fixtures import CloudEnv, launch
from tests.fakes.gcp_compute import error_body

STACK = "h100-training"


class Leftovers:
    """One cloud's provider, a candidate image and a launch location, and placements made
    as ``validate-image --nodes`` makes them (``ttl_h`` hours from now; negative: past)."""

    def __init__(self, env: CloudEnv) -> None:
        self.env = env
        self.provider = env.provider()
        self.image = env.seed_candidate()
        self.location = env.locations()[0]
        self.shape = "p5.48xlarge" if env.cloud == "aws" else "x"

    def placement(self, ttl_h: float, *, managed: bool = True) -> Placement:
        tags = instance_tags(stack=STACK, image_id=self.image.image_id,
                             ttl=dt.timedelta(hours=ttl_h), launched_by="dead-runner")  # fmt: skip
        if not managed:  # another team's placement: a past TTL, but not imagectl's
            tags = {TAG_TTL: tags[TAG_TTL]}
        placement = self.provider.create_placement(
            name=placement_name(STACK), location=self.location, shape=self.shape, count=2,
            tags=tags,
        )  # fmt: skip
        assert placement is not None
        return placement

    def launch_in(self, placement: Placement) -> str:
        ttl = dt.timedelta(hours=2)
        inst = launch(self.provider, self.image, self.shape, self.location, ttl=ttl,
                      launched_by="live-runner", placement=placement)  # fmt: skip
        return str(inst.instance_id)

    def exists(self, placement: Placement) -> bool:
        """Asked of the cloud itself, not through the provider."""
        fake = self.env.fake
        if self.env.cloud == "aws":
            ec2 = boto3.client("ec2", region_name=placement.location)
            groups = ec2.describe_placement_groups()["PlacementGroups"]
            return placement.name in {g["GroupName"] for g in groups}
        if self.env.cloud == "gcp":
            return (placement.location, placement.name) in fake.resource_policies
        return placement.resource_id.lower() in fake.resources

    def list_pages(self) -> int:
        """How many list requests the last listings of placements made."""
        if self.env.cloud == "aws":
            return 1  # DescribePlacementGroups answers at once
        wanted = {"gcp": "/aggregated/resourcePolicies", "azure": "/proximityPlacementGroups"}
        return len(
            [r for r in self.env.fake.requests
             if r.method == "GET" and r.path.endswith(wanted[self.env.cloud])]
        )  # fmt: skip

    def refuse_next_delete(self, placement: Placement) -> None:
        """The cloud's in-use refusal of the next delete of ``placement``, as when an
        instance is launched into it between the listing and the delete."""
        if self.env.cloud == "aws":
            moto_extensions.BEHAVIOUR.placement_in_use_race.add(placement.name)
        elif self.env.cloud == "gcp":
            body = error_body(400, f"The resource_policy resource '{placement.resource_id}' "
                              "is already being used by 'vm-launched-meanwhile'",
                              "resourceInUseByAnotherResource")  # fmt: skip
            path = f"/resourcePolicies/{placement.name}$"
            self.env.fake.add_fault(lambda r: (400, body, {}), method="DELETE", path=path)
        else:
            body = arm_error("OperationNotAllowed", "The proximity placement group is "
                             "referenced by VMs: vm-launched-meanwhile")  # fmt: skip
            path = f"/proximityPlacementGroups/{placement.name}$"
            self.env.fake.add_fault(lambda r: (409, body, {}), method="DELETE", path=path)


def _actions(reaped: list[Any]) -> dict[str, str]:
    return {r.placement.placement.name: r.action for r in reaped}


def test_only_an_expired_placement_holding_no_instance_is_deleted(cloud_env: CloudEnv) -> None:
    left = Leftovers(cloud_env)
    orphan = left.placement(-1)  # the killed run's: past its TTL, its nodes gone
    fresh = left.placement(+2)  # a run still going, before its launches
    busy = left.placement(-1)  # past its TTL but an instance is in it
    foreign = left.placement(-1, managed=False)
    inside = left.launch_in(busy)

    listed = {m.placement.name: m for m in left.provider.list_placements()}
    assert set(listed) == {orphan.name, fresh.name, busy.name}  # never another's
    assert listed[busy.name].members == (inside,) and listed[orphan.name].members == ()
    assert listed[orphan.name].tags[TAG_MANAGED] == "true"
    assert listed[orphan.name].placement == orphan  # what the run itself deletes
    assert left.list_pages() >= (1 if cloud_env.cloud == "aws" else 2)  # across pages

    dry = reap_placements(left.provider, dry_run=True)
    assert _actions(dry) == {orphan.name: "would-delete"}
    assert all(left.exists(p) for p in (orphan, fresh, busy, foreign))  # nothing deleted

    assert _actions(reap_placements(left.provider)) == {orphan.name: "deleted"}
    assert not left.exists(orphan)
    assert all(left.exists(p) for p in (fresh, busy, foreign))
    assert cloud_env.live_instances() == [inside]  # its instance untouched
    assert reap_placements(left.provider) == []  # a second sweep finds nothing more


def test_a_failed_deletion_is_reported_and_the_others_still_reaped(
    cli: Any, cloud_env: CloudEnv
) -> None:
    left = Leftovers(cloud_env)
    refused, orphan = left.placement(-1), left.placement(-1)
    fresh = left.placement(+2)
    left.refuse_next_delete(refused)

    dry = cli("reap", "--cloud", cloud_env.cloud, "--stack", STACK, "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert {r["placement"]: r["action"] for r in dry.json()["placements"]} == {
        refused.name: "would-delete", orphan.name: "would-delete"
    }  # fmt: skip
    assert all(left.exists(p) for p in (refused, orphan, fresh))

    result = cli("reap", "--cloud", cloud_env.cloud, "--stack", STACK, "--json")
    assert result.code == 1, result.out
    rows = {r["placement"]: r for r in result.json()["placements"]}
    assert {name: r["action"] for name, r in rows.items()} == {
        refused.name: "failed", orphan.name: "deleted"
    }  # fmt: skip
    assert "launched-meanwhile" in rows[refused.name]["error"]  # the cloud's own words
    assert rows[orphan.name]["kind"] == orphan.kind and rows[orphan.name]["stack"] == STACK
    assert left.exists(refused) and left.exists(fresh) and not left.exists(orphan)

    # the next sweep deletes it; the table names it as a placement
    table = cli("reap", "--cloud", cloud_env.cloud, "--stack", STACK)
    assert table.code == 0, table.out
    line = next(line for line in table.out.splitlines() if refused.name in line)
    assert line.split()[:3] == ["deleted", cloud_env.cloud, "placement"], table.out
    assert refused.kind in line and "stack h100-training" in line
    assert not left.exists(refused) and left.exists(fresh)
