"""One validation run: launch N hosts from the candidate, validate them in parallel
through Ansible, bind and decide, retry host problems on fresh hosts, always terminate.
A multi-node run (``nodes`` > 1) launches them in the cloud's placement (deleted after
they are terminated) and, once every host passed on its own, runs the collectives across
them: the fabric receipt (``imagectl.validation.fabric``) decides with the hosts'.

Termination is guaranteed three ways: ``finally`` here (with SIGINT/SIGTERM turned into
exceptions for the run's duration, and held while cleaning up), and ``imagectl reap``
for a runner killed with -9 (every instance, and a multi-node run's placement, carries
``imagectl:expires-at``; the reaper deletes an expired placement once it holds no
instance).
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.clouds.base import CapacityError, Instance, LaunchRequest, Provider, QuotaError
from imagectl.clouds.common import NotReachable, instance_tags
from imagectl.clouds.placement import Placement
from imagectl.core.fsutil import atomic_write_json
from imagectl.tags import TAG_LAUNCHED_BY, gcp_label_value
from imagectl.validation.decide import (
    HOST_PROBLEM,
    INCONCLUSIVE,
    VALIDATED,
    BadHost,
    Decision,
    decide,
)
from imagectl.validation.fabric import nodes as fabric_nodes
from imagectl.validation.fanout import AnsibleEvent, FanoutResult, run_validate_playbook
from imagectl.validation.progress import Reporter
from imagectl.validation.receipts import HostOutcome, load_bound
from imagectl.validation.request import ValidationRequest, host_vars
from imagectl.validation.signals import deferred_interrupts, interrupts_raise
from imagectl.validators.receipt import Receipt


@dataclass
class ValidationResult:
    decision: Decision
    outcomes: list[HostOutcome]
    launched: list[Instance] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    termination_errors: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    bad_hosts: list[BadHost] = field(default_factory=list)
    fabric: Receipt | None = None  # a multi-node run's fabric receipt
    placement: Placement | None = None

    def hosts(self) -> list[dict[str, object]]:
        """Each host's outcome, as ``--json`` shows it."""
        return [
            {
                "host": o.host,
                "slot": o.slot,
                "verdict": o.receipt.verdict if o.receipt else None,
                "worst_action": o.receipt.worst_action.value if o.receipt else None,
                "failed_checks": sorted({c.id for c in o.failed_checks}),
                "problem": o.problem,
            }
            for o in self.outcomes
        ]

    def launches(self) -> list[dict[str, str]]:
        return [{"instance_id": i.instance_id, "location": i.region} for i in self.launched]

    def to_dict(self) -> dict[str, object]:
        return {
            **self.decision.to_dict(),
            "rounds": self.rounds,
            "bad_hosts": [b.to_dict() for b in self.bad_hosts],
            "hosts": self.hosts(),
            "launched": self.launches(),
            "terminated": self.terminated,
            "termination_errors": self.termination_errors,
            "placement": self.placement.to_dict() if self.placement else None,
            "fabric": fabric_summary(self.fabric),
        }


def fabric_summary(receipt: Receipt | None) -> dict[str, object] | None:
    """A multi-node run's fabric receipt, as ``--json`` shows it."""
    if receipt is None:
        return None
    return {
        "verdict": receipt.verdict,
        "checks": {c.id: {"outcome": c.outcome.value, "measured": c.measured,
                          "message": c.message} for c in receipt.checks},
        "nccl_env": receipt.host.get("nccl_env"),
        "nodes": receipt.host.get("nodes"),
    }  # fmt: skip


# playbooks/validate.yml's first task: when it fails, the host never let the runner in
CONNECT_TASK = "Wait for the host to accept connections"


class NoCapacity(Exception):
    def __init__(self, errors: list[CapacityError]):
        self.errors = errors
        where = ", ".join(e.location for e in errors) or "no location"
        super().__init__(f"no capacity for the shape in any allowed location ({where})")


class ValidationRun:
    def __init__(
        self,
        provider: Provider,
        request: ValidationRequest,
        *,
        reporter: Reporter | None = None,
        on_receipt: Callable[[HostOutcome], None] | None = None,
        on_fabric: Callable[[Receipt], None] | None = None,
    ) -> None:
        self.provider = provider
        self.req = request
        self.reporter = reporter or Reporter()
        self.on_receipt = on_receipt
        self.on_fabric = on_fabric
        self.live: dict[int, Instance] = {}
        self.result = ValidationResult(Decision(INCONCLUSIVE, ["run did not finish"]), [])
        self._next_slot = 0
        self._workdir = Path(tempfile.mkdtemp(prefix="imagectl-validate-"))
        # Written once for every round: the hosts' --expect.
        self._expect_file = self._workdir / "expect.json"
        atomic_write_json(
            self._expect_file, request.expect.model_dump(mode="json"), indent=2, sort_keys=True
        )
        # Which run, and who launched it: an interrupt during a launch call leaves an
        # instance this run never learnt the id of; the final sweep finds it by this tag.
        # The run's token comes first: a GCP label keeps 63 characters, so a long actor
        # (a CI identity) would cut a token that came after it, and two runs of one actor
        # would each sweep the other's instances.
        self.launched_by = f"run-{secrets.token_hex(4)}/{request.launched_by}"

    # -- launching ---------------------------------------------------------------------------
    def _locations(self) -> list[str]:
        if self.req.locations:
            return list(self.req.locations)
        finder = getattr(self.provider, "candidate_locations", None)
        return list(finder(self.req.image)) if finder else [self.req.image.region]

    def _launch_one(self, locations: list[str]) -> tuple[int, Instance]:
        slot = self._next_slot
        self._next_slot += 1
        errors: list[CapacityError] = []
        for location in locations:
            self.reporter.step(f"slot {slot}: launching {self.req.shape} in {location}")
            try:
                inst = self.provider.launch(
                    LaunchRequest(
                        self.req.image,
                        self.req.shape,
                        location=location,
                        ttl=self.req.ttl,
                        launched_by=self.launched_by,
                        stack=self.req.stack,
                        ssh_public_key=self.req.ssh_public_key,
                        allowed_cidr=self.req.allowed_cidr,
                        placement=self.result.placement,
                    )
                )
            except CapacityError as exc:
                errors.append(exc)
                self.reporter.step(f"slot {slot}: no capacity in {location}: {exc.detail[:160]}")
                continue
            self.live[slot] = inst
            self.result.launched.append(inst)
            if self.result.placement is not None:  # every node where the first one landed
                locations[:] = [location]
            self.reporter.instance(slot, inst.instance_id, location, inst.state or "launched")
            return slot, inst
        raise NoCapacity(errors)

    def _terminate(self, slot: int) -> None:
        inst = self.live.pop(slot, None)
        if inst is None:
            return
        self.reporter.step(f"slot {slot}: terminating {inst.instance_id}")
        try:
            self.provider.terminate(inst)
        except Exception as exc:  # keep going: the reaper gets what is left
            self.result.termination_errors[inst.instance_id] = f"{type(exc).__name__}: {exc}"
            self.reporter.instance(slot, inst.instance_id, inst.region, "terminate failed")
            return
        self.result.terminated.append(inst.instance_id)
        self.reporter.instance(slot, inst.instance_id, inst.region, "terminated")

    # -- one round ---------------------------------------------------------------------------
    def _validate(self, slots: list[int]) -> dict[int, HostOutcome]:
        outcomes: dict[int, HostOutcome] = {}
        reachable: dict[int, Instance] = {}
        for slot in slots:
            inst = self.live[slot]
            try:
                ready = self.provider.wait_reachable(inst, timeout_s=self.req.reach_timeout_s)
            except NotReachable as exc:
                outcomes[slot] = HostOutcome(
                    inst.instance_id, inst.instance_id, None, f"unreachable: {exc.detail}", slot
                )
                self.reporter.instance(slot, inst.instance_id, inst.region, "unreachable")
                continue
            self.live[slot] = ready
            reachable[slot] = ready
            self.reporter.instance(slot, ready.instance_id, ready.region, ready.state or "ready")
        if not reachable:
            return outcomes
        receipt_dir = self._workdir / f"round-{len(self.result.outcomes)}-{min(reachable)}"
        receipt_dir.mkdir(parents=True, exist_ok=True)
        hosts = {
            inst.instance_id: host_vars(inst, slot, self.req, self._workdir)
            for slot, inst in reachable.items()
        }
        extravars = {
            "validate_receipt_dir": str(receipt_dir),
            "validate_candidate_id": self.req.image.image_id,
            "validate_expect": str(self._expect_file),
            "validate_profile": self.req.profile,
            "validate_sandbox": self.req.sandbox,
            "validate_wheel": self.req.wheel,
            "validate_timeout_s": int(self.req.validator_timeout_s),
            "validate_connect_timeout_s": int(self.req.reach_timeout_s),
        }
        self.reporter.step(f"running the validator on {len(hosts)} host(s) through Ansible")

        def on_event(event: AnsibleEvent) -> None:
            if not event.host:
                return
            status = {
                "runner_on_start": "running",
                "runner_on_ok": "ok",
                "runner_on_failed": "failed",
                "runner_on_unreachable": "unreachable",
                "runner_on_skipped": "skipped",
            }.get(event.kind)
            if status:
                self.reporter.task(event.host, event.task, status)

        fan: FanoutResult = run_validate_playbook(
            hosts=hosts,
            extravars=extravars,
            on_event=on_event,
            timeout_s=self.req.validator_timeout_s + self.req.reach_timeout_s + 120,
            playbook=self.req.playbook,
        )
        for slot, inst in reachable.items():
            outcome = load_bound(
                receipt_dir / f"{inst.instance_id}.json",
                host=inst.instance_id,
                instance_id=inst.instance_id,
                slot=slot,
                image_id=self.req.image.image_id,
                stack_digest=self.req.stack_digest,
            )
            if outcome.receipt is None:
                status = fan.host_status.get(inst.instance_id, "not run")
                detail = fan.host_messages.get(inst.instance_id, "")
                if outcome.problem == "no receipt came back":
                    why = {
                        "unreachable": "host unreachable over SSH",
                        "failed": "the validator crashed or timed out",
                    }.get(status, f"ansible: {status}")
                    if detail.startswith(CONNECT_TASK):  # a failed task, not "unreachable"
                        why = "host unreachable over SSH (login refused or no answer)"
                    outcome = HostOutcome(
                        outcome.host,
                        outcome.instance_id,
                        None,
                        f"{why}: {detail}".rstrip(": "),
                        slot,
                    )
            else:
                self.reporter.checks(inst.instance_id, outcome.receipt.checks)
                if self.on_receipt is not None:
                    self.on_receipt(outcome)
            outcomes[slot] = outcome
        return outcomes

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> ValidationResult:
        try:
            with interrupts_raise():
                self._run()
        finally:
            with deferred_interrupts():
                for slot in sorted(self.live):
                    self._terminate(slot)
                self._sweep()
                self._delete_placement()
                shutil.rmtree(self._workdir, ignore_errors=True)  # receipts, host vars
        return self.result

    def _delete_placement(self) -> None:
        placement = self.result.placement
        if placement is None:
            return
        self.reporter.step(f"deleting the {placement.kind} {placement.name}")
        try:
            self.provider.delete_placement(placement)
        except Exception as exc:  # reported; the instances are gone either way
            self.result.termination_errors[placement.name] = f"{type(exc).__name__}: {exc}"

    def _place(self, locations: list[str]) -> None:
        """A multi-node run's placement, in the first location, before any launch."""
        req = self.req
        tags = instance_tags(stack=req.stack, image_id=req.image.image_id, ttl=req.ttl,
                             launched_by=self.launched_by)  # fmt: skip
        placement = fabric_nodes.create_placement(self.provider, req, locations[0], tags)
        self.result.placement = placement
        if placement is not None:
            self.reporter.step(f"{placement.kind} {placement.name} created in {placement.location}")

    def _fabric(self, decision: Decision) -> Decision:
        """Every node passed alone: the collectives across them decide."""
        self.reporter.step(f"collectives across {len(self.live)} nodes")
        outcome = fabric_nodes.run_fabric(
            self.live, self.req, self._workdir, self._expect_file, self.result.placement,
            self.provider.cloud,
        )  # fmt: skip
        self.result.fabric = outcome.receipt
        if self.on_fabric is not None:
            self.on_fabric(outcome.receipt)
        return fabric_nodes.fabric_decision(outcome, decision)

    def _sweep(self) -> None:
        """Terminate any instance of this run still alive (e.g. one whose launch call was
        interrupted before it returned an id)."""
        # the tag as this run wrote it, or as a GCP label holds it (lower-cased, cut to
        # 63 characters, the token first): never one cloud's encoding on another's tag
        mine = {self.launched_by, gcp_label_value(self.launched_by)}
        try:
            found = self.provider.list_instances(managed_only=True)
        except Exception as exc:
            self.result.termination_errors["sweep"] = f"{type(exc).__name__}: {exc}"
            return
        for inst in found:
            tag = inst.tags.get(TAG_LAUNCHED_BY, "")
            if tag not in mine or inst.instance_id in self.result.terminated:
                continue
            self.reporter.step(f"terminating {inst.instance_id} (launch was interrupted)")
            try:
                self.provider.terminate(inst)
            except Exception as exc:
                self.result.termination_errors[inst.instance_id] = f"{type(exc).__name__}: {exc}"
                continue
            self.result.terminated.append(inst.instance_id)

    def _run(self) -> None:
        req = self.req
        try:
            locations = self._locations()
            self.reporter.step(
                f"validating {req.image.image_id} on {req.hosts} x {req.shape} "
                f"(locations: {', '.join(locations)})"
            )
            if req.nodes > 1:
                self._place(locations)
            for _ in range(req.hosts):
                self._launch_one(locations)
        except NoCapacity as exc:
            self.result.decision = Decision(INCONCLUSIVE, [str(exc)])
            return
        except QuotaError as exc:
            self.result.decision = Decision(INCONCLUSIVE, [f"quota exceeded: {exc}"])
            return
        current: dict[int, HostOutcome] = {}
        pending = sorted(self.live)
        retries_left = req.max_host_retries
        while True:
            self.result.rounds += 1
            current.update(self._validate(pending))
            decision = decide([current[s] for s in sorted(current)])
            self.result.outcomes = [current[s] for s in sorted(current)]
            if decision.verdict != HOST_PROBLEM:
                break
            self.result.bad_hosts.extend(decision.bad_hosts)
            bad_slots = [s for s, o in current.items() if o.host in decision.retry_hosts]
            if retries_left <= 0:
                decision = Decision(
                    INCONCLUSIVE,
                    [
                        f"hosts still failing hardware checks after {req.max_host_retries} retries",
                        *decision.reasons,
                    ],
                    bad_hosts=self.result.bad_hosts,
                )
                break
            retries_left -= 1
            self.reporter.step(
                "host problem (not an image fault): "
                + "; ".join(decision.reasons)
                + f"; retrying on {len(bad_slots)} fresh host(s)"
            )
            pending = []
            try:
                for slot in bad_slots:
                    self._terminate(slot)
                    del current[slot]
                    new_slot, _ = self._launch_one(locations)
                    pending.append(new_slot)
            except (NoCapacity, QuotaError) as exc:
                decision = Decision(
                    INCONCLUSIVE,
                    [f"no fresh host for the retry: {exc}"],
                    bad_hosts=self.result.bad_hosts,
                )
                break
        if decision.verdict == VALIDATED and req.nodes > 1:
            decision = self._fabric(decision)
            self.result.bad_hosts.extend(decision.bad_hosts)
        if decision.verdict != INCONCLUSIVE or not decision.bad_hosts:
            decision = Decision(
                decision.verdict,
                decision.reasons,
                decision.retry_hosts,
                self.result.bad_hosts or decision.bad_hosts,
            )
        self.result.decision = decision
        self.reporter.step(f"decision: {decision.verdict}: {'; '.join(decision.reasons)}")
