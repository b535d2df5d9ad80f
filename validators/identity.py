"""Which image a signed statement names: the cloud's full identity, compared whole.

What each cloud uses to identify an image is data: ``data/clouds.yaml``'s ``identity``
entry per cloud, each with its source (docs/reference: trust-and-revocation). Nothing
here names a cloud. As shipped:

- AWS: an AMI id is regional; the statement names the region, the owning account
  (DescribeImages ``OwnerId``) and the AMI id of every regional copy:
  ``aws/<region>/<account>/<ami-id>``. An observed AMI may be given as ``ami-...``,
  ``<region>/ami-...``, ``<region>/<account>/ami-...`` or the ARN
  ``arn:aws:ec2:<region>:<account>:image/ami-...``.
- Google Cloud: ``projects/<project>/global/images/<name>`` plus the image's numeric id
  (a name exists in many projects, and a new image can take a deleted one's name):
  ``gcp/projects/<p>/global/images/<name>@<id>``. Observed: that path (what the
  metadata server's ``instance/image`` gives, or a ``selfLink``), the ``selfLinkWithId``
  form ``projects/<p>/global/images/<numeric id>``, optionally ``@<id>``.
- Azure: the gallery image version's full resource id
  ``/subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<g>/
  images/<definition>/versions/<x.y.z>`` (a version number is only unique within its
  definition): ``azure/<resource id>``. ARM ids compare case-insensitively.
- The local cloud: ``local/<region>/<id>`` (a content address).

``mismatch`` is the one comparison for every cloud: each part the observed reference
gives must equal the signed one, and where a bare name matches images anywhere (Google
Cloud, Azure: the grammar has no region and a scope) an observed reference must name
its scope (project; subscription, group, gallery and definition), else it matches none.
The controller's own catalog rows (``whole=False``) name images of its own project and
account.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from imagectl.core.errors import UserError
from imagectl.validators.catalogs import DATA, _load

PARTS = ("region", "scope", "name", "number")
_SUBJECT = (r"^(?P<region>[^/]*)(?:/(?P<name>.*))?$",)  # a cloud the data does not describe
_PLACE = re.compile(r"\{(region|scope|name|number)(?:\[(\d+)\])?\}")
_OPTIONAL = re.compile(r"\[([^\[\]]*\{[^\[\]]*)\]")


class Grammar(BaseModel):
    """One cloud's image identity (``data/clouds.yaml``, ``clouds.<cloud>.identity``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    canonical: str = "{region}/{name}"
    observed: list[str] = Field(default_factory=list)
    subject: list[str] | None = None
    recognise: str = ""
    labels: dict[str, str] = Field(default_factory=lambda: {p: p for p in PARTS})
    image_scope: Literal["regional", "global"] = "regional"
    case_insensitive: bool = False
    source: str = ""

    @field_validator("observed", "subject", "recognise")
    @classmethod
    def _compiles(cls, value: object) -> object:
        for pattern in value if isinstance(value, list) else [value]:
            try:
                re.compile(str(pattern))
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from exc
        return value

    @field_validator("labels")
    @classmethod
    def _known_parts(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(PARTS))
        if unknown:
            raise ValueError(f"unknown identity parts {unknown}; the parts are {list(PARTS)}")
        return value

    @property
    def regional(self) -> bool:
        return self.image_scope == "regional"

    @property
    def flags(self) -> int:
        return re.DOTALL | (re.IGNORECASE if self.case_insensitive else 0)


@lru_cache(maxsize=1)
def _grammars() -> dict[str, Grammar]:
    clouds = (_load("clouds.yaml") or {}).get("clouds") or {}
    try:
        return {
            str(name): Grammar.model_validate(entry.get("identity") or {})
            for name, entry in clouds.items()
        }
    except ValidationError as exc:
        raise UserError(
            f"{DATA / 'clouds.yaml'}: an image identity entry is not valid: "
            f"{exc.errors()[0]['msg']}; correct it (the header comment describes the fields)"
        ) from exc


def grammar(cloud: str) -> Grammar:
    """``cloud``'s identity grammar (a cloud the data does not describe: the generic
    ``<region>/<id>`` one, every part named by itself)."""
    return _grammars().get(cloud) or Grammar()


def recognised_cloud(text: str) -> str | None:
    """The cloud whose ``recognise`` pattern a raw image id fits (the data's order)."""
    raw = text.strip()
    for cloud, g in _grammars().items():
        if g.recognise and re.search(g.recognise, raw, g.flags):
            return cloud
    return None


@dataclass(frozen=True)
class ImageRef:
    """One image as a cloud identifies it; None: the reference does not say."""

    cloud: str
    name: str | None  # AMI id, image name, gallery version, local id
    region: str | None = None  # on clouds whose images are regional
    scope: str | None = None  # AWS account; GCP project; Azure sub/rg/gallery/definition
    number: str | None = None  # Google Cloud's numeric image id

    def text(self) -> str:
        """The canonical form (a statement's subject is ``image:`` + this)."""
        template = grammar(self.cloud).canonical
        values = {p: getattr(self, p) or "" for p in PARTS}
        template = _OPTIONAL.sub(
            lambda m: m[1] if all(values[p] for p, _ in _PLACE.findall(m[1])) else "", template
        )
        width = max((int(i) + 1 for p, i in _PLACE.findall(template) if i), default=0)
        parts = (self.scope or "").split("/")
        if width and len(parts) != width:
            parts = (parts + ["..."] * width)[:width]

        def place(m: re.Match[str]) -> str:
            return parts[int(m[2])] if m[2] else str(values[m[1]])

        return f"{self.cloud}/{_PLACE.sub(place, template)}"


def _ref(cloud: str, g: Grammar, found: re.Match[str], region: str | None) -> ImageRef:
    groups = found.groupdict()
    scopes = sorted(k for k in groups if k.startswith("scope_"))
    scope = "/".join(str(groups[k]) for k in scopes) if scopes else groups.get("scope")
    if scope and g.case_insensitive:
        scope = scope.lower()
    given = groups.get("region")
    return ImageRef(
        cloud,
        groups.get("name") or None,
        (region if given is None and g.regional else given) or None,
        scope or None,
        groups.get("number") or None,
    )


def parse(cloud: str, text: str, region: str | None = None) -> ImageRef:
    """``text`` (an observed image: an id, a path, a resource id) as an ``ImageRef`` of
    ``cloud``; ``region`` where the caller knows it (AWS instance metadata)."""
    raw = text.strip().rstrip("/")
    g = grammar(cloud)
    for pattern in g.observed:
        found = re.match(pattern, raw, g.flags)
        if found:
            return _ref(cloud, g, found, region)
    return ImageRef(cloud, raw or None, region)


def from_subject(subject: str) -> ImageRef | None:
    """The ``ImageRef`` a statement's ``image:<cloud>/...`` subject names (None: not one)."""
    if not subject.startswith("image:"):
        return None
    cloud, _, rest = subject.removeprefix("image:").partition("/")
    g = grammar(cloud)
    if g.subject is None and g.observed:
        return parse(cloud, rest)
    for pattern in _SUBJECT if g.subject is None else g.subject:
        found = re.match(pattern, rest, g.flags)
        if found:
            return _ref(cloud, g, found, None)
    return None


def subject_name(ref: ImageRef) -> str:
    return f"image:{ref.text()}"


def _same(cloud: str, a: str, b: str) -> bool:
    return a.lower() == b.lower() if grammar(cloud).case_insensitive else a == b


def mismatch(signed: ImageRef, seen: ImageRef, *, whole: bool = True) -> str | None:
    """Why ``signed`` is not ``seen`` (None: the same image). Every part ``seen`` gives
    must be the signed one's; with ``whole``, on a cloud where a bare name names images
    anywhere (no region, a scope) a reference must name its scope, and some name or
    numeric id is always needed."""
    if signed.cloud != seen.cloud:
        return f"it is an image on {signed.cloud}, not {seen.cloud}"
    cloud = seen.cloud
    g = grammar(cloud)
    if seen.name is None and seen.number is None:
        return "the image is not named"
    if whole and not g.regional and "scope" in g.labels and seen.scope is None:
        what = g.labels["scope"]
        form = ImageRef(cloud, seen.name, scope=".../.../.../...").text().partition("/")[2]
        return (
            f"{seen.name} names no {what}, and a bare name can name an image in any "
            f"{what}: give the full identity ({form})"
        )
    for part in PARTS:
        want, have = getattr(seen, part), getattr(signed, part)
        if want is None or (part == "region" and not g.regional):
            continue
        what = g.labels.get(part, part)
        if have is None:
            return f"the statement does not name the {what} ({want} was asked for)"
        if not _same(cloud, have, want):
            return f"another {what}: {want}, but the statement names {have}"
    return None


def first_mismatch(signed: list[str], seen: ImageRef, *, whole: bool = True) -> str | None:
    """None when one of the ``signed`` subjects is ``seen``; else why the closest is not
    (the first subject of the same cloud, or the first at all)."""
    why: str | None = None
    same_cloud = False
    for subject in signed:
        ref = from_subject(subject)
        if ref is None:
            continue
        reason = mismatch(ref, seen, whole=whole)
        if reason is None:
            return None
        if why is None or (ref.cloud == seen.cloud and not same_cloud):
            why, same_cloud = f"{subject}: {reason}", ref.cloud == seen.cloud
    return why or "the statement names no image"
