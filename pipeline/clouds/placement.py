"""The placement a multi-node validation run's hosts share: created before its hosts are
launched, named in each launch, deleted after they are terminated.

Per cloud, what its documents say keeps GPU hosts close on the fabric:

- AWS: a cluster placement group (``CreatePlacementGroup`` ``Strategy=cluster``: "packs
  instances close together inside an Availability Zone ... low-latency network
  performance necessary for tightly-coupled node-to-node communication"; EC2 User Guide,
  Placement strategies), named in ``RunInstances`` ``Placement.GroupName``;
- Google Cloud: a compact placement policy (``resourcePolicies.insert`` with
  ``groupPlacementPolicy.collocation: COLLOCATED``; Compute Engine, "About compact
  placement policies"), a regional resource named in ``instances.insert``
  ``resourcePolicies``;
- Azure: a proximity placement group (``Microsoft.Compute/proximityPlacementGroups``,
  type Standard; "Proximity placement groups"), named in the VM's
  ``properties.proximityPlacementGroup.id``.

The local cloud has none (one machine).

A runner that dies between the creation and the deletion (``kill -9``, a lost CI machine)
leaves the placement behind: each carries imagectl's managed and TTL marking (AWS and
Azure: the tags of ``imagectl.tags``; Google Cloud: its description, a resource policy
has no labels), ``Provider.list_placements`` lists the marked ones as ``ManagedPlacement``
records and ``imagectl reap`` deletes those whose TTL passed and that hold no instance
(``imagectl.clouds.reap``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

from imagectl.tags import TAG_TTL


@dataclass(frozen=True)
class Placement:
    cloud: str
    kind: str  # cluster placement group | compact placement policy | proximity placement group
    name: str
    location: str  # the region (AWS: the group's zone is chosen by the first launch)
    resource_id: str  # the group name / policy URL / ARM id the launch names

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ManagedPlacement:
    """A placement imagectl made, as the cloud lists it: its marking read back as tags
    (``imagectl.tags`` keys) and the instances it holds now (ids or names; a placement
    holding any is in use and is never deleted by the reaper)."""

    placement: Placement
    tags: dict[str, str] = field(default_factory=dict)
    members: tuple[str, ...] = ()

    def expires_at(self) -> dt.datetime | None:
        """The TTL the run wrote; None where there is none or it is no time (never expired)."""
        raw = self.tags.get(TAG_TTL)
        try:
            when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None
        except ValueError:
            return None
        return when.replace(tzinfo=when.tzinfo or dt.timezone.utc) if when else None
