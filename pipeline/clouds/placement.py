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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Placement:
    cloud: str
    kind: str  # cluster placement group | compact placement policy | proximity placement group
    name: str
    location: str  # the region (AWS: the group's zone is chosen by the first launch)
    resource_id: str  # the group name / policy URL / ARM id the launch names

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
