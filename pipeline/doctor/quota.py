"""The quota check, written once for every cloud: each validation shape's quota entry
(``images/catalog/quotas.yaml``) is read through the cloud's quota API, and what is free is
compared with what ``hosts`` machines of that shape need.

A cloud supplies only its ``QuotaApi`` (in ``clouds/<cloud>/doctor.py``): the call that
reads its quotas in the run's region or location, the permission that call needs, and
what a shape counts against in its answer. The rest is here: each read is made once, and
a read that fails is one warning naming the call, its error and what to do (grant the
permission when the cloud refused it), after which nothing more is asked there."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding, error_text
from imagectl.doctor.needs import quota

# what a cloud's quota read answers (a usage table, a quota's value): its reader and its
# ``quota`` agree on it
A = TypeVar("A")

NETWORK = "check the endpoint and the network, then run doctor again"


@dataclass(frozen=True)
class Quota:
    """One quota as the cloud reports it, against what the run needs."""

    label: str  # which quota, where: "NVIDIA_H100_GPUS in us-central1"
    wanted: int  # what the run's hosts of the shape need, in the quota's unit
    free: float  # what is left to use; the quota's value where ``limit`` is None
    increase: str  # what to do when it is short (the request to make)
    # the quota's value where the cloud also reports its use; None: the cloud reports the
    # value only (AWS Service Quotas), and ``free`` is that value
    limit: float | None = None
    unit: str = ""  # " vCPUs"; "" for a count of GPUs


@dataclass(frozen=True)
class Reported:
    """What a shape counts against where the cloud reports each quota with its use: the
    read's answer maps a quota's name to (limit, use); the shape's quotas.yaml entry names
    its quota in the field ``name`` and what one machine takes in ``per_host``. A quota
    the answer lacks is 0 of 0."""

    name: str  # "metric"
    per_host: str  # "gpus"
    increase: str  # what to do when it is short, with {name} and {where}
    unit: str = ""

    def __call__(
        self,
        where: str,
        answer: Mapping[str, tuple[float, float]],
        entry: Mapping[str, Any],
        hosts: int,
    ) -> Quota:
        name = str(entry[self.name])
        limit, use = answer.get(name, (0, 0))
        return Quota(
            label=f"{name} in {where}",
            wanted=int(entry[self.per_host]) * hosts,
            free=limit - use,
            limit=limit,
            unit=self.unit,
            increase=self.increase.format(name=name, where=where),
        )


@dataclass(frozen=True)
class QuotaApi(Generic[A]):
    """How one cloud reads its quotas in the region or location ``where``."""

    where: str  # "us-central1", "eastus"
    call: str  # the call as the cloud's reference names it: "Compute regions.get"
    permission: str  # the permission the call needs: "compute.regions.get"
    # one call: its answer for a key (``where``, or the entry's ``key``)
    read: Callable[[str], A]
    # (where, the answer, the shape's quotas.yaml entry, hosts) -> the shape's quota
    quota: Callable[[str, A, Mapping[str, Any], int], Quota]
    # whether the call's error is the cloud refusing it (the permission is missing)
    refused: Callable[[Exception], bool]
    # the key an entry is read with where one read does not answer every shape (AWS reads
    # one quota code a call); None: one read of ``where``
    key: Callable[[Mapping[str, Any]], str] | None = None
    explain: Callable[[Exception], str] = error_text  # the call's error in one line


def quota_findings(images: Path, shapes: list[str], hosts: int, api: QuotaApi[A]) -> list[Finding]:
    """One finding per validation shape: a blocker where its quota has less free than
    ``hosts`` machines need (with the cloud's request to make), a warning where
    quotas.yaml has no entry for it; one warning in all where the cloud's quota cannot be
    read (refused, unparsable, unreachable), and no call made after it."""
    out: list[Finding] = []
    answers: dict[str, A] = {}  # key -> the call's answer: each read made once
    unread: Finding | None = None
    for shape in shapes:
        entry = quota(images, shape)
        if entry is None:
            out.append(
                Finding(
                    "quota",
                    WARNING,
                    f"no quota known for {shape}",
                    "add it to images/catalog/quotas.yaml",
                )
            )
            continue
        if unread is not None:
            continue
        key = api.key(entry) if api.key is not None else api.where
        if key not in answers:
            try:
                answers[key] = api.read(key)
            except Exception as exc:  # refused, unparsable, unreachable: one warning
                unread = _unread(api, key, exc)
                out.append(unread)
                continue
        out.append(_judged(api.quota(api.where, answers[key], entry, hosts), shape, hosts))
    return out


def _unread(api: QuotaApi[A], key: str, exc: Exception) -> Finding:
    what = "quotas" if key == api.where else f"quota {key}"
    return Finding(
        "quota",
        WARNING,
        f"cannot read {what} in {api.where} ({api.call}): {api.explain(exc)}",
        f"grant {api.permission}" if api.refused(exc) else NETWORK,
    )


def _judged(q: Quota, shape: str, hosts: int) -> Finding:
    need = f"{hosts} x {shape} needs {q.wanted}"
    if q.limit is None:
        short = f"{q.label} is {q.free:g}{q.unit}; {need}"
        enough = f"{q.label}: {q.free:g}{q.unit} >= {q.wanted}"
    else:
        short = f"{q.label}: {q.free:g}{q.unit} free of {q.limit:g}; {need}"
        enough = f"{q.label}: {q.free:g}{q.unit} free >= {q.wanted}"
    if q.free < q.wanted:
        return Finding("quota", BLOCKER, short, q.increase)
    return Finding("quota", OK, enough)
