"""Which image a signed statement names: the cloud's full identity, compared whole.

What each cloud uses to identify an image (docs/reference: trust-and-revocation):

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
gives must equal the signed one, and on Google Cloud and Azure an observed reference
must name its project (its subscription, group, gallery and definition): a bare name
or version number matches images anywhere, so it matches none. The controller's own
catalog rows (``whole=False``) name images of its own project and account.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLOUDS = ("aws", "gcp", "azure", "local")
_AWS_ARN = re.compile(r"^arn:aws[a-z-]*:ec2:([a-z0-9-]*):(\d*):image/(ami-[0-9a-f]+)$")
_GCP_PATH = re.compile(
    r"^(?:https://(?:www|compute)\.googleapis\.com/compute/(?:v1|beta|alpha)/)?"
    r"projects/([^/]+)/global/images/([^/@]+)(?:@(\d+))?$"
)
_AZURE_ID = re.compile(
    r"^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Compute/"
    r"galleries/([^/]+)/images/([^/]+)/versions/([^/]+)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ImageRef:
    """One image as a cloud identifies it; None: the reference does not say."""

    cloud: str
    name: str | None  # AMI id, image name, gallery version, local id
    region: str | None = None  # AWS and local; Google images are global
    scope: str | None = None  # AWS account; GCP project; Azure sub/rg/gallery/definition
    number: str | None = None  # Google Cloud's numeric image id

    def text(self) -> str:
        """The canonical form (a statement's subject is ``image:`` + this)."""
        if self.cloud == "aws":
            return f"aws/{self.region or ''}/{self.scope or ''}/{self.name or ''}"
        if self.cloud == "gcp":
            tail = f"@{self.number}" if self.number else ""
            return f"gcp/projects/{self.scope or ''}/global/images/{self.name or ''}{tail}"
        if self.cloud == "azure":
            parts = (self.scope or "").split("/")
            sub, rg, gallery, definition = (parts + ["..."] * 4)[:4] if len(parts) != 4 else parts
            return (
                f"azure//subscriptions/{sub}/resourceGroups/{rg}/providers/"
                f"Microsoft.Compute/galleries/{gallery}/images/{definition}/versions/"
                f"{self.name or ''}"
            )
        return f"{self.cloud}/{self.region or ''}/{self.name or ''}"


def parse(cloud: str, text: str, region: str | None = None) -> ImageRef:
    """``text`` (an observed image: an id, a path, a resource id) as an ``ImageRef`` of
    ``cloud``; ``region`` where the caller knows it (AWS instance metadata)."""
    raw = text.strip().rstrip("/")
    if cloud == "aws":
        arn = _AWS_ARN.match(raw)
        if arn:
            return ImageRef("aws", arn[3], arn[1] or region, arn[2] or None)
        parts = raw.split("/")
        name = parts[-1] or None
        found_region = parts[0] if len(parts) >= 2 else region
        account = parts[1] if len(parts) >= 3 else None
        return ImageRef("aws", name, found_region or None, account or None)
    if cloud == "gcp":
        path = _GCP_PATH.match(raw.removeprefix("global/"))
        if path:
            project, name, number = path[1], path[2], path[3]
            if name.isdigit():  # selfLinkWithId: the numeric id in the name's place
                return ImageRef("gcp", None, None, project, number or name)
            return ImageRef("gcp", name, None, project, number)
        name, _, number = raw.removeprefix("global/").rpartition("/")[2].partition("@")
        return ImageRef("gcp", name or None, None, None, number or None)
    if cloud == "azure":
        at = raw.lower().find("/subscriptions/")  # a catalog form may lead with a region
        arm = _AZURE_ID.match(raw[at:] if at > 0 else raw)
        if arm:
            scope = "/".join(p.lower() for p in (arm[1], arm[2], arm[3], arm[4]))
            return ImageRef("azure", arm[5], None, scope)
        return ImageRef("azure", raw.rpartition("/")[2] or None)
    parts = raw.split("/", 1)
    if len(parts) == 2 and cloud == "local" and not raw.startswith("sha256:"):
        return ImageRef(cloud, parts[1] or None, parts[0] or None)
    return ImageRef(cloud, raw or None, region)


def from_subject(subject: str) -> ImageRef | None:
    """The ``ImageRef`` a statement's ``image:<cloud>/...`` subject names (None: not one)."""
    if not subject.startswith("image:"):
        return None
    cloud, _, rest = subject.removeprefix("image:").partition("/")
    if cloud == "aws":
        parts = rest.split("/")
        if len(parts) == 3:
            return ImageRef("aws", parts[2] or None, parts[0] or None, parts[1] or None)
        if len(parts) == 2:  # statements signed before the account was named
            return ImageRef("aws", parts[1] or None, parts[0] or None)
        return None
    if cloud in ("gcp", "azure"):
        return parse(cloud, rest)
    region, _, name = rest.partition("/")
    return ImageRef(cloud, name or None, region or None)


def subject_name(ref: ImageRef) -> str:
    return f"image:{ref.text()}"


_WHAT = {
    "region": {"aws": "region", "local": "region"},
    "scope": {"aws": "account", "gcp": "project", "azure": "gallery image definition"},
    "name": {"aws": "AMI id", "gcp": "image name", "azure": "version", "local": "image id"},
    "number": {"gcp": "numeric image id"},
}


def _same(cloud: str, a: str, b: str) -> bool:
    return a.lower() == b.lower() if cloud == "azure" else a == b


def mismatch(signed: ImageRef, seen: ImageRef, *, whole: bool = True) -> str | None:
    """Why ``signed`` is not ``seen`` (None: the same image). Every part ``seen`` gives
    must be the signed one's; with ``whole``, a Google or Azure reference must name its
    project (gallery image definition), and some name or numeric id is always needed."""
    if signed.cloud != seen.cloud:
        return f"it is an image on {signed.cloud}, not {seen.cloud}"
    cloud = seen.cloud
    if seen.name is None and seen.number is None:
        return "the image is not named"
    if whole and cloud in ("gcp", "azure") and seen.scope is None:
        what = _WHAT["scope"][cloud]
        form = ImageRef(cloud, seen.name, scope=".../.../.../...").text().partition("/")[2]
        return (
            f"{seen.name} names no {what}, and a bare name can name an image in any "
            f"{what}: give the full identity ({form})"
        )
    for part in ("region", "scope", "name", "number"):
        want, have = getattr(seen, part), getattr(signed, part)
        if want is None or (part == "region" and cloud == "gcp"):
            continue
        what = _WHAT[part].get(cloud, part)
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
