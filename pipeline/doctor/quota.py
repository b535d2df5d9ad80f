"""The quota check, written once for every cloud: each validation shape's quota entry
(``images/catalog/quotas.yaml``) is read through the cloud's reader, and what is free is
compared with what ``hosts`` machines of that shape need.

A cloud supplies only its reader (in ``clouds/<cloud>/doctor.py``): given the shape's entry
and the host count, it answers the quota as the cloud reports it (``Quota``), or one
finding when it cannot read it (the same finding for several shapes is said once)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.needs import quota


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


# (the shape's quotas.yaml entry, hosts) -> the quota, or a finding saying why it is unread
QuotaReader = Callable[[Mapping[str, Any], int], Quota | Finding]


def quota_findings(images: Path, shapes: list[str], hosts: int, read: QuotaReader) -> list[Finding]:
    """One finding per validation shape: a blocker where its quota has less free than
    ``hosts`` machines need (with the cloud's request to make), a warning where
    quotas.yaml has no entry for it or the cloud's quota cannot be read."""
    out: list[Finding] = []
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
        got = read(entry, hosts)
        if isinstance(got, Finding):
            if got not in out:
                out.append(got)
            continue
        out.append(_judged(got, shape, hosts))
    return out


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
