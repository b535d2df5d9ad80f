"""What changed between two images: base image, packages, kernel modules, Python packages.

``compare_images`` compares two catalog images' inventories (``imagectl.provenance.inventory``)
and the base images their builds started from (``Build.base_image_id``). Sections, in
this order: ``base`` (the base image's id: two builds of one stack digest on different
bases differ here), ``pinned`` (the packages either image holds, i.e. the stack's pins,
then the kernel and the NVIDIA kernel modules), ``packages`` (every other dpkg package)
and ``python`` (the validator venv). Each change is added, removed or changed
(old -> new version); renderings as text, Markdown (a pull-request comment) and JSON.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Image
from imagectl.core.errors import UserError
from imagectl.core.safetext import md_cell, plain
from imagectl.provenance.inventory import Inventory, parse_inventory
from imagectl.tags import TAG_SOURCE_IMAGE

SECTIONS = ("base", "pinned", "packages", "python")
SECTION_TITLES = {
    "base": "Base image",
    "pinned": "Pinned (held packages, kernel, NVIDIA kernel modules)",
    "packages": "Other packages",
    "python": "Validator Python packages",
}
PRIMARY_ARCHES = ("all", "amd64", "arm64")
CANDIDATE_STATES = (
    ImageState.BUILT,
    ImageState.VALIDATING,
    ImageState.VALIDATED,
    ImageState.INCONCLUSIVE,
    ImageState.BLOCKED,
)


@dataclass(frozen=True)
class Change:
    section: str
    kind: str  # added | removed | changed
    name: str
    old: str | None
    new: str | None


@dataclass
class ImageDiff:
    before: str  # how each image is named (its label)
    after: str
    changes: list[Change]

    def counts(self) -> dict[str, int]:
        return {
            k: sum(1 for c in self.changes if c.kind == k) for k in ("changed", "added", "removed")
        }

    def to_dict(self) -> dict[str, object]:
        return {
            "before": self.before,
            "after": self.after,
            "counts": self.counts(),
            "changes": [asdict(c) for c in self.changes],
        }


def _deb_versions(inv: Inventory) -> dict[str, str]:
    return {
        (p.name if p.arch in PRIMARY_ARCHES else f"{p.name}:{p.arch}"): p.version for p in inv.dpkg
    }


def _compare(section: str, a: dict[str, str | None], b: dict[str, str | None]) -> list[Change]:
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            out.append(Change(section, "removed", name, a[name], None))
        elif name not in a:
            out.append(Change(section, "added", name, None, b[name]))
        elif a[name] != b[name]:
            out.append(Change(section, "changed", name, a[name], b[name]))
    return out


def diff_inventories(
    a: Inventory, b: Inventory, *, held: set[str], before: str, after: str
) -> ImageDiff:
    deb_a, deb_b = _deb_versions(a), _deb_versions(b)
    pinned = {n for n in set(deb_a) | set(deb_b) if n.split(":")[0] in held}
    pins_a: dict[str, str | None] = {n: v for n, v in deb_a.items() if n in pinned}
    pins_b: dict[str, str | None] = {n: v for n, v in deb_b.items() if n in pinned}
    pins_a["kernel"], pins_b["kernel"] = a.kernel, b.kernel
    for inv, pins in ((a, pins_a), (b, pins_b)):
        for m in inv.kernel_modules:
            pins[f"{m.name}.ko"] = m.version or m.srcversion
    rest_a: dict[str, str | None] = {n: v for n, v in deb_a.items() if n not in pinned}
    rest_b: dict[str, str | None] = {n: v for n, v in deb_b.items() if n not in pinned}
    py_a: dict[str, str | None] = {p.name.lower(): p.version for p in a.python}
    py_b: dict[str, str | None] = {p.name.lower(): p.version for p in b.python}
    changes = (
        _compare("pinned", pins_a, pins_b)
        + _compare("packages", rest_a, rest_b)
        + _compare("python", py_a, py_b)
    )
    return ImageDiff(before=before, after=after, changes=changes)


def base_change(a: dict[str, object] | None, b: dict[str, object] | None) -> list[Change]:
    """The base image's id before and after (``BaseImage.to_dict()`` of each build; a
    build recorded before bases were has none, shown as unknown)."""
    old = str(a["id"]) if a else None
    new = str(b["id"]) if b else None
    if old == new:
        return []
    name = str((b or a or {}).get("name") or "base image")
    if old is None or new is None:
        return [Change("base", "changed", name, old or "unknown", new or "unknown")]
    return [Change("base", "changed", name, old, new)]


def _summary(d: ImageDiff) -> str:
    c = d.counts()
    if not d.changes:
        return "no base image, package, kernel module or Python package changed"
    return f"{c['changed']} changed, {c['added']} added, {c['removed']} removed"


def render_text(d: ImageDiff) -> str:
    """For a terminal: the images' names and packages without control sequences."""
    lines = [f"{plain(d.before)} -> {plain(d.after)}: {_summary(d)}"]
    for section in SECTIONS:
        mine = [c for c in d.changes if c.section == section]
        if not mine:
            continue
        lines.append(f"{SECTION_TITLES[section]}:")
        for c in mine:
            name, old, new = (plain(x).replace("\n", " ") for x in (c.name, c.old, c.new))
            if c.kind == "changed":
                lines.append(f"  ~ {name} {old} -> {new}")
            elif c.kind == "added":
                lines.append(f"  + {name} {new}")
            else:
                lines.append(f"  - {name} {old}")
    return "\n".join(lines) + "\n"


def render_markdown(d: ImageDiff) -> str:
    """A pull-request comment. What the images reported (names, versions) and their labels
    are inert code spans (``imagectl.core.safetext.md_cell``): no heading, link, image, HTML,
    mention or reference can come from a host."""
    out = [f"### imagectl diff\n\n{md_cell(d.before)} → {md_cell(d.after)}: {_summary(d)}\n"]
    for section in SECTIONS:
        mine = [c for c in d.changes if c.section == section]
        if not mine:
            continue
        out.append(
            f"\n**{SECTION_TITLES[section]}**\n\n| | name | before | after |\n|---|---|---|---|"
        )
        for c in mine:
            out.append(f"| {c.kind} | {md_cell(c.name)} | {md_cell(c.old)} | {md_cell(c.new)} |")
    return "\n".join(out) + "\n"


def compare_images(session: Session, before: Image, after: Image) -> ImageDiff:
    """The diff between two catalog images' SBOMs (exit 2 when one has none)."""
    boms = []
    for img in (before, after):
        row = repo.sbom_of(session, img)
        if row is None:
            raise UserError(
                f"image {img.label} has no SBOM in the catalog",
                hint="It was built before SBOMs were recorded, or without provisioning; "
                "build the stack again to compare",
            )
        boms.append(row)
    a, b = (parse_inventory(json.dumps(r.inventory), f"the SBOM of {i.label}")
            for r, i in zip(boms, (before, after), strict=True))  # fmt: skip
    found = diff_inventories(
        a, b, held=set(boms[0].held) | set(boms[1].held), before=before.label, after=after.label
    )
    bases = [img.build.base_image if img.build else None for img in (before, after)]
    found.changes[:0] = base_change(*bases)
    return found


def current_and_candidate(session: Session, stack: str, cloud: str | None) -> tuple[Image, Image]:
    """The stack's promoted image (its "latest" pointer) and its newest candidate."""
    pointers = repo.list_pointers(session, stack=stack, cloud=cloud)
    if not pointers:
        raise UserError(
            f"stack {stack} has no promoted image{' on ' + cloud if cloud else ''} to compare with",
            hint="Name both images: `imagectl diff IMAGE_A IMAGE_B`",
        )
    current = pointers[0].image
    source_id = (current.tags or {}).get(TAG_SOURCE_IMAGE)
    if source_id is not None:  # the pointer names a regional copy: compare its source
        current = repo.get_image(session, int(source_id)) or current
    candidates = [
        img
        for img in repo.list_images(
            session, stack=stack, cloud=current.cloud, state=list(CANDIDATE_STATES)
        )
        if TAG_SOURCE_IMAGE not in (img.tags or {}) and img.build_pk != current.build_pk
    ]
    if not candidates:
        raise UserError(
            f"stack {stack} has no candidate image newer than the promoted {current.label}",
            hint=f"Build one first (`imagectl build --stack {stack} --cloud CLOUD`), or name both "
            "images",
        )
    return current, candidates[0]
