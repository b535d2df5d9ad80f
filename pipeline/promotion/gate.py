"""The gate: nothing reaches a region without a passing, fresh receipt for this image.

``check_gate(session, image, stack_digest=, max_age_hours=)`` returns the list of reasons
the image may not be promoted (empty: it may). Rules, each a line of the refusal:

- the image is ``validated`` (``blocked`` images are refused with their block reason);
- it has at least one receipt in the catalog, and the newest receipt of every validation
  shape says ``verdict: pass`` and no worst action that blocks the image;
- every shape the stack validates on the image's cloud (``validation_shapes``) has such a
  receipt (an image of a stack naming an L4 and an A10G shape is not promoted to A10Gs
  after passing on L4s alone), and no receipt is recorded under a shape the stack does
  not name or under another shape than the one its own expectations were made for;
- every such receipt names this image id and the stack digest of the image, and that
  digest is the stack file's current digest (the pins did not change since the build);
- where the image's build recorded its expectations (``builds.expectations``:
  what validate-image judges the image by), the record's stack digest is the one the
  image was built from, and every host receipt was judged by exactly the expectations
  the build recorded for its shape;
- the receipt finished less than ``validation.max_receipt_age_hours`` ago, and not in the
  future beyond a small clock skew (``MAX_CLOCK_SKEW``: a negative age is no age);
- its profile is at least the stack's ``validation.profile`` (boot < quick < full < burn);
- every check the profile requires on the shape ran (``receipt.coverage``: none skipped,
  errored or missing), and a loaded profile's receipt has that coverage record;
- it was made on the image, not replayed from a snapshot: a replay receipt passes only
  when it was made with the explicit ``--sandbox`` switch (the docs' try-it paths, docs/sandbox.md),
  which the receipt records; ``sandbox_receipts`` names them for the event log and status;
  and only for an image whose cloud is emulated here (``sandbox_on_real_cloud``: the
  preflight's test, ``imagectl.clouds.account.real_cloud``): on a real cloud endpoint a
  sandbox receipt is refused wherever it was made, and no attestation signs for it;
- a receipt whose GPU work ran on the host's own toolkit (``validate --toolkit host``) is
  refused where the stack pins another toolkit (``validation.toolkit``): it stands for that
  host, not for the image;
- where the stack validates on several nodes together (``validation.nodes`` > 1), every
  validation shape has a fabric receipt (``imagectl validate-image --nodes N``: the
  collectives across N nodes, imagectl.validation.fabric.receipt) of at least that many
  nodes; like every receipt it must pass, be fresh and name this image and digest.

The receipts are read as the validator's ``Receipt`` model (``ValidationRun.body``): a
stored body that is not a valid receipt is corrupt, ``CorruptReceipt`` (bad input, exit 2).
``--force --reason`` overrides the refusals (the promotion records them with who and why).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Image, ValidationRun
from imagectl.core.errors import EXIT_FAILED, UserError
from imagectl.provenance.sandbox import sandbox_on_real_cloud, sandboxed
from imagectl.stacks.expectations import BuildExpectations
from imagectl.validation.fabric.receipt import is_fabric, nodes_of
from imagectl.validators.compute.readiness import TOOLKIT_HOST, toolkit_matches
from imagectl.validators.coverage import profile_strength
from imagectl.validators.receipt import Receipt
from imagectl.validators.results import Action

BLOCKING_ACTIONS = (Action.BLOCK_IMAGE,)
MAX_CLOCK_SKEW = dt.timedelta(minutes=5)  # hosts run NTP (chrony); more is a broken clock


class GateRefused(UserError):
    """The image may not be promoted (exit 1): the reasons name each failed rule."""

    exit_code = EXIT_FAILED

    def __init__(self, label: str, reasons: list[str], *, hint: str | None = None):
        self.reasons = reasons
        super().__init__(
            f"promotion of {label} refused: {'; '.join(reasons)}",
            hint=hint
            or (
                "Validate the image again on its cloud (`imagectl validate-image IMAGE "
                "--cloud CLOUD`), or override the gate with `imagectl promote IMAGE --force "
                "--reason '...'` (recorded in the event log)"
            ),
        )


class ImageBlocked(GateRefused):
    """The image is blocked; only ``--force`` promotes it."""


def refusal_hint(
    session: Session, image: Image, *, revoked: bool = False, unreadable: bool = False
) -> str:
    """What can help an image the gate refused, with its own ids: validating again cannot
    unblock a blocked image, so its hint names a new build, the block's reason and who set
    it; a revocation names only the new build (``--force`` does not override it); a
    revocation store that could not be read, the access to fix and the same command."""
    ident, cloud, stack = image.cloud_image_id, image.cloud, image.stack
    if unreadable:
        return (
            "A revocation store that cannot be read could be hiding a revocation, so "
            "nothing is promoted until each answers: fix the access named above, then run "
            f"`imagectl promote {ident} --cloud {cloud}` again"
        )
    build = (
        f"build a new candidate (`imagectl build --stack {stack} --cloud {cloud}`) and "
        f"validate it (`imagectl validate-image IMAGE --cloud {cloud}`)"
    )
    if revoked:
        return f"A revoked image is never promoted again: {build}"
    if image.state != ImageState.BLOCKED:
        return (
            f"Validate it again (`imagectl validate-image {ident} --cloud {cloud}`), or "
            f"override the gate with `imagectl promote {ident} --cloud {cloud} --force "
            "--reason '...'` (recorded in the event log)"
        )
    who = _blocked_by(session, image)
    return (
        f"Validating it again does not lift a block: {build}. The block "
        f"({image.blocked_reason or 'no reason recorded'}) was set by {who}; only a decision "
        f"to ship it anyway lifts it: `imagectl promote {ident} --cloud {cloud} --force "
        "--reason '...'`, recorded with who and why"
    )


def _blocked_by(session: Session, image: Image) -> str:
    for event in repo.events(session, image=image, kind="image.state"):
        if (event.details or {}).get("to") == ImageState.BLOCKED.value:
            return f"{event.actor} at {event.at:%Y-%m-%d %H:%M} UTC"
    return "an unrecorded actor"


class CorruptReceipt(UserError):
    """A receipt in the catalog is not a valid receipt (exit 2)."""


def _body(run: ValidationRun) -> Receipt:
    try:
        return run.body
    except UserError as exc:
        raise CorruptReceipt(
            exc.message,
            where=run.where,
            hint="Record the receipt again from the validator's output",
        ) from None


_sandboxed = sandboxed


def sandbox_receipts(session: Session, image: Image) -> list[str]:
    """The hosts whose newest receipt is a sandbox replay (accepted by the explicit switch)."""
    return [
        f"{run.shape} on {run.host}"
        for run in repo.latest_receipts(session, image)
        if _sandboxed(_body(run))
    ]


def _profile_reasons(body: Receipt, where: str, required_profile: str) -> list[str]:
    reasons = []
    if profile_strength(body.profile) < profile_strength(required_profile):
        reasons.append(
            f"{where} ran profile {body.profile}, weaker than the stack's validation.profile "
            f"{required_profile}"
        )
    if profile_strength(body.profile) < profile_strength("quick"):
        return reasons
    if body.coverage is None:
        reasons.append(
            f"{where} has no coverage record (a validator older than 0.2): it cannot show "
            "that the profile's GPU checks ran; validate again"
        )
        return reasons
    if not _sandboxed(body):
        for check_id, why in sorted(body.coverage.not_run.items()):
            reasons.append(f"{where}: required check {check_id} did not run ({why})")
    return reasons


def _mode_reasons(body: Receipt, where: str) -> list[str]:
    if body.mode == "live" or _sandboxed(body):
        return []
    return [
        f"{where} is a replay of a recorded snapshot ({body.snapshot or 'unnamed'}), "
        "not a run on the image; validate on hosts booted from the image (a try-it sandbox "
        "validates with --sandbox, which the receipt and the event log record)"
    ]


def _toolkit_reasons(body: Receipt, where: str, pinned: dict[str, str] | None) -> list[str]:
    """A receipt made on the host's own toolkit passes only where it is the pinned one."""
    tk = body.coverage.toolkit if body.coverage is not None else None
    if pinned is None or not tk or tk.get("source") != TOOLKIT_HOST:
        return []
    if toolkit_matches(tk, pinned, str(body.coverage.device if body.coverage else "")):
        return []
    return [
        f"{where} ran its GPU work on the host's own toolkit (validate --toolkit host: torch "
        f"{tk.get('version')}, CUDA {tk.get('cuda') or 'none'}), not the stack's pinned torch "
        f"{pinned['torch']} (CUDA {pinned['cuda']}): validate with the stack's toolkit "
        "(imagectl validate-image ships it)"
    ]


def _shape_reasons(runs: list[ValidationRun], required: list[str] | None) -> list[str]:
    if required is None or not runs:
        return []
    have = {run.shape for run in runs}
    reasons = [
        f"no receipt for validation shape {shape}: the stack validates on "
        f"{', '.join(required)}; validate it there too (`imagectl validate-image IMAGE --cloud "
        "CLOUD` without --shape validates every shape)"
        for shape in required
        if shape not in have
    ]
    reasons += [
        f"{run.where} is for shape {run.shape}, which the stack's validation_shapes "
        f"({', '.join(required)}) do not name"
        for run in runs
        if run.shape not in required
    ]
    return reasons


def _nodes_reasons(runs: list[ValidationRun], required: list[str] | None, nodes: int) -> list[str]:
    """The multi-node rule: a fabric receipt of >= ``nodes`` nodes for every shape."""
    if nodes <= 1:
        return []
    shapes = required if required is not None else sorted({run.shape for run in runs})
    fabric = {run.shape: run for run in runs if is_fabric(_body(run))}
    reasons = []
    for shape in shapes:
        run = fabric.get(shape)
        if run is None:
            reasons.append(
                f"no multi-node result for shape {shape}: the stack's validation.nodes is "
                f"{nodes}; validate with `imagectl validate-image IMAGE --cloud CLOUD --nodes "
                f"{nodes}` (collectives across the nodes in the cloud's placement)"
            )
        elif nodes_of(_body(run)) < nodes:
            reasons.append(
                f"{run.where} ran across {nodes_of(_body(run))} node(s), the stack's "
                f"validation.nodes is {nodes}"
            )
    return reasons


def _record_reasons(image: Image, runs: list[ValidationRun]) -> list[str]:
    """The build's expectations record (none: built before builds recorded it): made from
    the digest the image was built from, and what every host receipt was judged by."""
    build = image.build
    if build is None:
        return []
    where = f"build {build.build_id}"
    record = BuildExpectations.from_columns(
        build.expectations_digest, build.expectations, where=f"catalog {where}"
    )
    if record is None:
        return []
    if record.stack_digest != image.stack_digest:
        return [
            f"{where} recorded expectations of stack digest {record.stack_digest[:12]}, "
            f"but the image was built from {image.stack_digest[:12]}"
        ]
    reasons = []
    for run in runs:
        body = _body(run)
        recorded = record.shapes.get(run.shape)
        if is_fabric(body) or recorded is None:  # a shape it lacks: the shape rules say so
            continue
        want = recorded.model_dump(mode="json")
        # origin says where they came from (the old path wrote "stack:<name>"), not what
        differ = sorted(k for k in {*want, *body.expectations} - {"origin"}
                        if want.get(k) != body.expectations.get(k))  # fmt: skip
        if differ:
            reasons.append(
                f"{run.where} was judged by other expectations than {where} recorded for "
                f"{run.shape} ({', '.join(differ)})"
            )
    return reasons


def check_gate(
    session: Session,
    image: Image,
    *,
    stack_digest: str,
    max_age_hours: float,
    required_profile: str = "boot",
    required_shapes: list[str] | None = None,
    required_nodes: int = 1,
    required_toolkit: dict[str, str] | None = None,
    now: dt.datetime | None = None,
) -> list[str]:
    """Reasons ``image`` may not be promoted; empty when it passes the gate.
    ``required_shapes``: the stack's validation shapes on the image's cloud (``None``:
    whichever shapes have receipts, for callers without a stack); ``required_nodes``: the
    stack's ``validation.nodes``; ``required_toolkit``: its ``validation.toolkit`` (torch,
    cuda)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    reasons: list[str] = []
    if image.state == ImageState.BLOCKED:
        reasons.append(f"the image is blocked ({image.blocked_reason or 'no reason recorded'})")
    elif image.state != ImageState.VALIDATED:
        reasons.append(f"the image is '{image.state}', not 'validated'")
    if image.stack_digest != stack_digest:
        reasons.append(
            f"the image was built from stack digest {image.stack_digest[:12]}, but the stack "
            f"file's digest is now {stack_digest[:12]}"
        )
    runs = repo.latest_receipts(session, image)
    if not runs:
        reasons.append("no validation receipt in the catalog")
    reasons += _record_reasons(image, runs)
    reasons += _shape_reasons(runs, required_shapes)
    reasons += _nodes_reasons(runs, required_shapes, required_nodes)
    for run in runs:
        _body(run)  # a corrupt receipt is CorruptReceipt before any reason reads it
    reasons += sandbox_on_real_cloud(image, runs)
    for run in runs:
        where = run.where
        body = _body(run)
        made_for = body.expectations.get("shape")
        if made_for and made_for != run.shape:
            reasons.append(f"{where} was made for shape {made_for}, not {run.shape}")
        if body.image_id != image.cloud_image_id:
            reasons.append(f"{where} names image {body.image_id}, not {image.cloud_image_id}")
        if body.stack != image.stack:
            reasons.append(f"{where} names stack {body.stack}, not {image.stack}")
        if body.stack_digest != image.stack_digest:
            reasons.append(f"{where} names stack digest {str(body.stack_digest)[:12]}")
        # the row's columns were copied from the body when it was recorded; either saying
        # fail (an edited row) refuses
        if not body.passed or run.verdict != "pass":
            reasons.append(f"{where} verdict is {body.verdict if not body.passed else run.verdict}")
        worst = {body.worst_action.value, run.worst_action}
        for action in sorted(worst & {a.value for a in BLOCKING_ACTIONS}):
            reasons.append(f"{where} asks to {action}")
        reasons += _mode_reasons(body, where)
        reasons += _profile_reasons(body, where, required_profile)
        reasons += _toolkit_reasons(body, where, required_toolkit)
        finished = body.finished
        age = now - finished
        if age > dt.timedelta(hours=max_age_hours):
            hours = age.total_seconds() / 3600
            reasons.append(f"{where} is {hours:.1f} h old (maximum {max_age_hours:g} h)")
        elif -age > MAX_CLOCK_SKEW:
            reasons.append(
                f"{where} finished at {finished.isoformat()}, {(-age).total_seconds():.0f} s "
                f"in the future (clock skew allows {MAX_CLOCK_SKEW.total_seconds():.0f} s): "
                "its time cannot be trusted"
            )
    return reasons
