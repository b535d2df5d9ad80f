"""The validation stage for a cloud candidate: find the image, judge it by the
expectations its build recorded, launch its hosts on the shape, run the validator on each,
record every receipt and the decision in the catalog and the image's state tag, and sign
the attestation of a validated image.

Expectations once, at build: the build recorded the image's expectations on each
validation shape of its cloud, with the stack digest they came from, in the catalog
(``builds.expectations``; ``imagectl.stacks.expectations.BuildExpectations``). Validation
ships exactly those to the hosts and never resolves them again, so a stack edited after
the build does not change how the image is judged. The record's digest must be the one the
image was built from (its catalog row and its ``imagectl:stack-digest`` tag). The stack
file is still read for how to run the validation (login user, the cloud's options and
locations, nodes, the run's GPU toolkit). An image whose build recorded no expectations
(built before they were recorded, or not in this catalog: ``--stack``) takes the old
path: its expectations are resolved from the stack now, and it is refused when the stack
no longer resolves to the digest it was built from (so the old path can only judge it by
the pins it was built from).

``imagectl validate-image`` parses its options into an ``ImageValidationRequest`` and
calls ``validate_image``; so does ``imagectl run`` for the local cloud, whose instances are
QEMU VMs (``imagectl.clouds.local``): one path for every cloud.

Who logs in is the cloud's (``CloudSpec.login_user``: the user the launch gave the key
to). A remote cloud's hosts are reached over SSH from the runner's address only, so
``runner_cidr`` is required there: without it the security group / firewall rule / NSG
admits nobody and the run would wait for a host it can never reach.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from imagectl.actor import current_actor
from imagectl.building.records import BuiltImage
from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.clouds.account import endpoint_env, real_cloud
from imagectl.clouds.base import CloudImage, Provider
from imagectl.clouds.options import provider_options
from imagectl.clouds.registry import get_provider
from imagectl.clouds.spec import CloudSpec
from imagectl.core.errors import UserError
from imagectl.core.fsutil import atomic_write
from imagectl.doctor.offline import preflight
from imagectl.paths import Workspace
from imagectl.provenance.attest import attest_image
from imagectl.provenance.keys import NoSigner
from imagectl.stacks import load_resolved
from imagectl.stacks.expectations import for_shape
from imagectl.stacks.resolve import ResolvedStack
from imagectl.stacks.schema import CloudCommon
from imagectl.tags import TAG_DIGEST
from imagectl.validation.decide import BLOCKED, INCONCLUSIVE, VALIDATED, Decision
from imagectl.validation.inventory import InventoryOverride
from imagectl.validation.outcome import ImageValidationOutcome, ShapeRun
from imagectl.validation.progress import Reporter
from imagectl.validation.receipts import HostOutcome
from imagectl.validation.records import CatalogRecorder
from imagectl.validation.request import ValidationRequest
from imagectl.validation.run import ValidationRun
from imagectl.validation.signals import interrupts_raise
from imagectl.validation.toolkit import run_wheelhouse
from imagectl.validators.expectations import Expectations
from imagectl.validators.receipt import Receipt


@dataclass(frozen=True)
class ImageValidationRequest:
    """What ``imagectl validate-image`` asks for (its options, parsed)."""

    image_id: str
    spec: CloudSpec[CloudCommon]  # the cloud (its name resolved once, by the command)
    stack: str | None = None
    shape: str | None = None
    hosts: int = 1
    profile: str | None = None
    locations: tuple[str, ...] = ()
    ttl_h: float = 3.0
    max_retries: int = 2
    reach_timeout_s: float = 900.0
    validator_timeout_s: float = 1800.0
    runner_cidr: str | None = None
    ssh_key: str | None = None
    inventory_override: Path | None = None
    wheel: str | None = None
    sandbox: bool = False
    receipts_dir: Path | None = None  # a copy of every receipt that came back
    # hosts validated together (collectives across them, in the cloud's placement); None:
    # the stack's validation.nodes
    nodes: int | None = None


@dataclass(frozen=True)
class Judgement:
    """What the image is judged by: its expectations per shape and their stack digest."""

    expects: dict[str, Expectations]
    digest: str
    source: str  # ImageValidationOutcome.expectations_from


def validate_image(
    ws: Workspace, req: ImageValidationRequest, reporter: Reporter
) -> ImageValidationOutcome:
    """Validate the candidate on its shapes (``state``: validated, blocked or
    inconclusive). Instances are always terminated."""
    # Local input first: a bad override file is exit 2 before any cloud call.
    override = InventoryOverride.load(req.inventory_override) if req.inventory_override else None
    spec = req.spec
    if req.sandbox:
        refuse_sandbox_on_real_cloud(spec.name)
    built = _built(spec.name, req.image_id)
    if built is not None and req.stack and req.stack != built.stack:
        raise UserError(
            f"image {req.image_id} was built from stack {built.stack}, not {req.stack}",
            hint=f"Pass --stack {built.stack}, or leave --stack out",
        )
    stack = req.stack or (built.stack if built else None)
    if not stack:
        raise UserError(
            f"image {req.image_id} is not in the catalog, so its stack is unknown",
            hint="Pass --stack NAME (the stack it was built from)",
        )
    # how to run the validation (cloud options, login user, nodes, toolkit); what the
    # image is judged by comes from its build's record where there is one
    _, resolved = load_resolved(ws.images, stack)
    settings = spec.settings(resolved.stack)
    login_user = spec.login_user(settings)
    over_ssh = not (override and override.local)
    if spec.remote and over_ssh and not req.runner_cidr:
        raise UserError(
            f"validating on {spec.name} needs the runner's address: the validation hosts "
            "admit SSH from --runner-cidr only, and without it they admit nobody (the run "
            "would wait for hosts it can never reach)",
            hint="Pass --runner-cidr <this machine's public address>/32 (or set "
            "IMAGECTL_RUNNER_CIDR); behind NAT, the address the internet sees",
        )
    if spec.remote:  # the cheap part of `imagectl doctor`, before any cloud call
        preflight(resolved, ws.compat_dir, spec.name, real=real_cloud(spec.name),
                  runner_cidr=req.runner_cidr if over_ssh else None)  # fmt: skip
    provider = get_provider(spec, provider_options(resolved, spec))
    judged = _judgement(ws, req, built, resolved, list(settings.validation_shapes))
    image = _find_image(provider, req, spec.build_region(settings), judged, stack, built)
    record = built.expectations if built else None
    profile = req.profile or (record and record.profile) or resolved.stack.validation.profile
    nodes = _nodes(req, resolved)
    # the GPU toolkit the hosts install for the run, made (and checked against its lock)
    # before any host is launched: a missing lock or changed bytes stop here
    toolkit = run_wheelhouse(resolved, profile, override)
    if toolkit is not None:
        _same_toolkit(judged, resolved)
    # The run's own key: a 0700 folder (mkdtemp), removed however the run ends (SIGTERM
    # too: it is raised as an interrupt while the run holds the key).
    keydir = Path(tempfile.mkdtemp(prefix="imagectl-key-"))
    try:
        with interrupts_raise():
            private_key, public_key = _ssh_key(req.ssh_key, over_ssh, keydir)
            requests = [
                ValidationRequest(
                    image=image,
                    stack=stack,
                    stack_digest=judged.digest,
                    shape=shape,
                    expect=expect,
                    hosts=nodes if nodes > 1 else req.hosts,
                    nodes=nodes,
                    profile=profile,
                    ttl=dt.timedelta(hours=req.ttl_h),
                    locations=list(req.locations) or None,
                    max_host_retries=req.max_retries,
                    reach_timeout_s=req.reach_timeout_s,
                    validator_timeout_s=req.validator_timeout_s,
                    allowed_cidr=req.runner_cidr,
                    ssh_user=login_user,
                    ssh_private_key=private_key,
                    ssh_public_key=public_key,
                    launched_by=current_actor(),
                    override=override,
                    wheel=req.wheel or "",
                    sandbox=req.sandbox,
                    toolkit_wheelhouse=str(toolkit) if toolkit else "",
                )
                for shape, expect in judged.expects.items()
            ]
            return _run(provider, image, judged, requests, reporter, override, req)
    finally:
        shutil.rmtree(keydir, ignore_errors=True)


def _judgement(
    ws: Workspace,
    req: ImageValidationRequest,
    built: BuiltImage | None,
    resolved: ResolvedStack,
    stack_shapes: list[str],
) -> Judgement:
    """The image's expectations on the shapes validated now (--shape, else every shape
    its build recorded, else every shape the stack validates on): its build's record, or
    (an image whose build recorded none) the stack resolved now."""
    record = built.expectations if built else None
    if built is None or record is None:
        shapes = [req.shape] if req.shape else stack_shapes
        why = (
            "not in this catalog" if built is None
            else "its build recorded none" if built.build_id
            else "no build of it in this catalog"
        )  # fmt: skip
        return Judgement(
            {shape: for_shape(ws.images, resolved, shape) for shape in shapes},
            resolved.digest,
            f"stack {resolved.name} as it resolves now ({why})",
        )
    where = f"build {built.build_id} of image {req.image_id}"
    if record.stack_digest != built.stack_digest:
        raise UserError(
            f"the expectations {where} recorded came from stack digest "
            f"{record.stack_digest[:12]}, but the image was built from "
            f"{built.stack_digest[:12]}: its build record does not describe it",
            where="catalog",
            hint="Build a new candidate (its build records its expectations again)",
        )
    if req.shape and req.shape not in record.shapes:
        raise UserError(
            f"--shape {req.shape}: {where} recorded expectations for "
            f"{', '.join(sorted(record.shapes)) or 'no shape'} only, and the image is judged "
            "by what its build recorded",
            hint=f"Pass --shape {sorted(record.shapes)[0]}" if record.shapes else
            "Build a new candidate of a stack that names the shape",
        )  # fmt: skip
    shapes = [req.shape] if req.shape else list(record.shapes)
    return Judgement(
        {shape: record.shapes[shape] for shape in shapes},
        record.stack_digest,
        f"build {built.build_id}",
    )


def _same_toolkit(judged: Judgement, resolved: ResolvedStack) -> None:
    """The toolkit the run ships comes from the stack's validation.toolkit and its lock;
    the hosts judge it against the one the image's expectations name. Where the stack's
    pin changed since the build, the run would judge the image by a toolkit it was never
    meant to carry: exit 2 before any host is launched."""
    now = resolved.validator_toolkit
    for expect in judged.expects.values():
        if expect.validator_toolkit != now:
            raise UserError(
                f"the stack's validation.toolkit is now {_toolkit_text(now)}, but the image "
                f"is judged by {_toolkit_text(expect.validator_toolkit)} ({judged.source}), "
                "and the run ships the stack's toolkit",
                hint="Build a new candidate from the current stack, or restore the stack's "
                "validation.toolkit pin to validate this image",
            )


def _toolkit_text(tk: dict[str, str] | None) -> str:
    return f"torch {tk['torch']} ({tk['variant']})" if tk else "none"


def _run(
    provider: Provider,
    image: CloudImage,
    judged: Judgement,
    requests: list[ValidationRequest],
    reporter: Reporter,
    override: InventoryOverride | None,
    req: ImageValidationRequest,
) -> ImageValidationOutcome:
    """One validation run per shape, in turn; the image's decision is theirs together:
    blocked when a shape blocks it (the shapes after it are not paid for), validated when
    every shape validated it, else inconclusive."""
    recorder = CatalogRecorder()
    recorder.start(
        cloud=provider.cloud,
        region=image.region,
        image_id=image.image_id,
        stack=requests[0].stack,
        digest=judged.digest,
        tags=image.tags,
    )
    provider.tag_state(image, ImageState.VALIDATING)
    results: list[ShapeRun] = []
    try:
        with reporter:
            for request in requests:
                if len(requests) > 1:
                    reporter.step(f"shape {request.shape}")
                run = ValidationRun(
                    provider, request, reporter=reporter,
                    on_receipt=_recording(recorder, request.shape, req.receipts_dir),
                    on_fabric=_recording_fabric(recorder, request.shape, req.receipts_dir),
                )  # fmt: skip
                results.append(ShapeRun(request.shape, run.run()))
                if results[-1].result.decision.verdict == BLOCKED:
                    break
    except KeyboardInterrupt:
        recorder.finish(Decision(INCONCLUSIVE, ["the run was interrupted"]))
        provider.tag_state(image, ImageState.INCONCLUSIVE)
        raise
    decision = combined(results, [r.shape for r in requests])
    state = recorder.finish(decision)
    provider.tag_state(image, state)
    attestation = None
    if state == ImageState.VALIDATED and recorder.image_pk is not None:
        attestation = _attest(recorder, provider)
    return ImageValidationOutcome(
        image_id=image.image_id,
        cloud=provider.cloud,
        stack=requests[0].stack,
        state=state,
        decision=decision,
        runs=tuple(results),
        receipts=receipt_kind(override, req.sandbox),
        expectations_from=judged.source,
        toolkit_wheelhouse=requests[0].toolkit_wheelhouse or None,
        attestation=attestation,
    )


def _attest(recorder: CatalogRecorder, provider: Provider) -> str | None:
    """Sign the validated image's attestation; with no signer configured (and no local
    key: only ``imagectl attest`` makes one) the image stays validated, unsigned, and the
    event log says how to sign it (the gate refuses it until then)."""
    assert recorder.image_pk is not None
    try:
        return attest_image(recorder.catalog, recorder.image_pk, provider).digest
    except NoSigner as exc:
        with recorder.catalog.transaction() as s:
            repo.log_event(
                s, "image.unattested", f"validated but not signed: {exc.message}",
                image=repo.image_row(s, recorder.image_pk), details={"hint": exc.hint},
            )  # fmt: skip
        return None


def _recording(
    recorder: CatalogRecorder, shape: str, receipts_dir: Path | None
) -> Callable[[HostOutcome], None]:
    def record(outcome: HostOutcome) -> None:
        recorder.receipt(outcome, shape=shape)
        if receipts_dir is not None and outcome.receipt is not None:
            receipts_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(
                receipts_dir / f"{outcome.host}.json",
                outcome.receipt.model_dump_json(indent=2) + "\n",
            )

    return record


def _nodes(req: ImageValidationRequest, resolved: ResolvedStack) -> int:
    """How many hosts are validated together: --nodes, else the stack's validation.nodes."""
    nodes = req.nodes if req.nodes is not None else resolved.stack.validation.nodes
    if nodes < 1:
        raise UserError(
            f"--nodes {nodes}: a run needs at least one node", hint="Pass --nodes 2 or more"
        )
    if nodes > 1 and req.hosts not in (1, nodes):
        raise UserError(
            f"--hosts {req.hosts} and --nodes {nodes} disagree: a multi-node run validates "
            "its nodes, each alone and then together",
            hint=f"Drop --hosts (the run launches {nodes} hosts), or pass --nodes 1",
        )
    return nodes


def _recording_fabric(
    recorder: CatalogRecorder, shape: str, receipts_dir: Path | None
) -> Callable[[Receipt], None]:
    def record(receipt: Receipt) -> None:
        recorder.fabric(receipt, shape=shape)
        if receipts_dir is not None:
            receipts_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(receipts_dir / f"fabric-{shape}.json",
                         receipt.model_dump_json(indent=2) + "\n")  # fmt: skip

    return record


def combined(results: list[ShapeRun], shapes: list[str]) -> Decision:
    """The image's decision from its shapes' (reasons prefixed with the shape when there
    are several): a block on any shape blocks it, and only every shape validated
    validates it."""
    several = len(shapes) > 1

    def named(shape: str, reasons: list[str]) -> list[str]:
        return [f"{shape}: {r}" for r in reasons] if several else list(reasons)

    decisions = [(r.shape, r.result.decision) for r in results]
    bad = [h for _, d in decisions for h in d.bad_hosts]
    blocked = [(s, d) for s, d in decisions if d.verdict == BLOCKED]
    if blocked:
        return Decision(BLOCKED, [r for s, d in blocked for r in named(s, d.reasons)],
                        bad_hosts=bad)  # fmt: skip
    if len(decisions) == len(shapes) and all(d.verdict == VALIDATED for _, d in decisions):
        return Decision(VALIDATED, [r for s, d in decisions for r in named(s, d.reasons)],
                        bad_hosts=bad)  # fmt: skip
    reasons = [r for s, d in decisions if d.verdict != VALIDATED for r in named(s, d.reasons)]
    return Decision(INCONCLUSIVE, reasons or ["not every shape was validated"], bad_hosts=bad)


def _find_image(
    provider: Provider,
    req: ImageValidationRequest,
    region: str,
    judged: Judgement,
    stack: str,
    built: BuiltImage | None,
) -> CloudImage:
    """The candidate in its cloud (in its build region), tagged with the digest it is
    judged by: its build record's, or (no record) the stack's current pins."""
    image = provider.get_image(req.image_id, region)
    if image is None:
        raise UserError(
            f"image {req.image_id} was not found in {provider.cloud} region {region}",
            hint="Check the id with `imagectl status` or the cloud console",
        )
    tagged = image.tags.get(TAG_DIGEST)
    if tagged and tagged not in (judged.digest, provider.spec.tag_value(judged.digest)):
        if built is not None and built.expectations is not None:
            raise UserError(
                f"image {req.image_id} is tagged with stack digest {tagged[:12]}, but its "
                f"build {built.build_id} recorded {judged.digest[:12]}: the tag was changed, "
                "or the image is not this build's",
                hint="Build a new candidate",
            )
        raise UserError(
            f"image {req.image_id} was built from stack digest {tagged[:12]}, but "
            f"{stack} now resolves to {judged.digest[:12]} (its build recorded no "
            "expectations to judge it by)",
            hint="Build a new candidate from the current stack",
        )
    return image


def _built(cloud: str, image_id: str) -> BuiltImage | None:
    """What the catalog records for this image, if the catalog knows it (a row with its
    build first: a row validation made for an image it did not know has none)."""
    catalog = open_catalog()
    with catalog.transaction() as s:
        rows = [r for r in repo.list_images(s, cloud=cloud) if r.cloud_image_id == image_id]
        if not rows:
            return None
        return BuiltImage.of_row(min(rows, key=lambda r: r.build is None))


def _ssh_key(path: str | None, needed: bool, folder: Path) -> tuple[str | None, str | None]:
    """(private key path, public key text): the given key, or a fresh one for this run."""
    if path:
        pub = Path(path + ".pub")
        if not pub.is_file():
            raise UserError(f"no public key next to {path}", hint=f"Expected {pub}")
        return path, pub.read_text().strip()
    if not needed or not shutil.which("ssh-keygen"):
        return None, None
    key = folder / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "imagectl-validation", "-f",
         str(key)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(key), (folder / "id_ed25519.pub").read_text().strip()


def refuse_sandbox_on_real_cloud(cloud: str) -> None:
    """``--sandbox`` receipts are try-it replays the promotion gate accepts: only for an
    emulated cloud (``imagectl.clouds.account.real_cloud``, the preflight's test)."""
    if not real_cloud(cloud):
        return
    raise UserError(
        f"--sandbox marks the receipts as try-it replays of a recorded snapshot, which the "
        f"promotion gate accepts, so it is only for an emulated cloud; here {cloud}'s SDK "
        f"reaches the real cloud (${endpoint_env(cloud)} is unset or names a host other "
        "than this machine's loopback)",
        hint="Leave --sandbox out and validate on hosts booted from the image (a replay "
        "without --sandbox never promotes), or point the SDK at the emulator "
        "(`python -m imagectl.clouds.aws.sandbox` writes the environment for it)",
    )


def receipt_kind(override: InventoryOverride | None, sandbox: bool) -> str:
    """live (hosts booted from the image) or replay (test-mode hosts replaying snapshots)."""
    replays = override is not None and any(
        override.for_slot(i).get("validate_snapshot") for i in range(len(override.slots) + 1)
    )
    if not replays:
        return "live"
    return "sandbox replay" if sandbox else "replay"
