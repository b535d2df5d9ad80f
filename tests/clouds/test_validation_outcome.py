"""validate-image's outcome is a typed object; its JSON (``to_dict``,
what --json prints and the run summary keeps) merges the shapes' runs: every host with
its shape, the launches, terminations and termination errors of all, the fabric receipt
per shape."""

from __future__ import annotations

from imagectl.catalog.lifecycle import ImageState
from imagectl.clouds.base import Instance
from imagectl.validation.decide import BLOCKED, INCONCLUSIVE, VALIDATED, Decision
from imagectl.validation.outcome import ImageValidationOutcome, ShapeRun
from imagectl.validation.receipts import HostOutcome
from imagectl.validation.run import ValidationResult
from imagectl.validation.stage import combined


def _run(shape: str, verdict: str, host: str, *, leaked: bool = False) -> ShapeRun:
    instance = Instance(
        cloud="aws", region="us-east-1a", instance_id=f"i-{host}", shape=shape, image_id="ami-1"
    )
    result = ValidationResult(
        decision=Decision(verdict, [f"{host} said so"]),
        outcomes=[HostOutcome(host=host, instance_id=instance.instance_id, problem="unreachable")],
        launched=[instance],
        terminated=[] if leaked else [instance.instance_id],
        termination_errors={instance.instance_id: "throttled"} if leaked else {},
        rounds=1,
    )
    return ShapeRun(shape, result)


def test_two_shapes_merge_into_one_outcome() -> None:
    runs = (
        _run("p5.48xlarge", VALIDATED, "a"),
        _run("p4d.24xlarge", INCONCLUSIVE, "b", leaked=True),
    )
    decision = combined(list(runs), ["p5.48xlarge", "p4d.24xlarge"])
    outcome = ImageValidationOutcome(
        image_id="ami-1", cloud="aws", stack="h100-training", state=ImageState.INCONCLUSIVE,
        decision=decision, runs=runs, receipts="live", expectations_from="build b-1",
    )  # fmt: skip
    assert outcome.verdict == INCONCLUSIVE
    assert outcome.shapes == ["p5.48xlarge", "p4d.24xlarge"]
    assert outcome.reasons == ["p4d.24xlarge: b said so"]
    assert outcome.termination_errors == {"i-b": "throttled"}
    data = outcome.to_dict()
    assert data["shape"] == "p5.48xlarge, p4d.24xlarge"
    assert data["state"] == "inconclusive" and data["verdict"] == INCONCLUSIVE
    assert [(h["host"], h["shape"]) for h in data["hosts"]] == [
        ("a", "p5.48xlarge"), ("b", "p4d.24xlarge"),
    ]  # fmt: skip
    assert data["rounds"] == 2
    assert [i["instance_id"] for i in data["launched"]] == ["i-a", "i-b"]
    assert data["terminated"] == ["i-a"]
    assert data["termination_errors"] == {"i-b": "throttled"}
    assert data["expectations_from"] == "build b-1"
    assert data["fabric"] == {} and data["placements"] == []


def test_a_blocked_shape_blocks_the_image() -> None:
    runs = [_run("p5.48xlarge", BLOCKED, "a")]
    assert combined(runs, ["p5.48xlarge", "p4d.24xlarge"]).verdict == BLOCKED
    runs = [_run("p5.48xlarge", VALIDATED, "a")]  # one of two shapes: not validated
    assert combined(runs, ["p5.48xlarge", "p4d.24xlarge"]).verdict == INCONCLUSIVE


def test_a_node_at_fault_in_a_multi_node_run_is_a_typed_bad_host() -> None:
    from imagectl.validation.decide import BadHost
    from imagectl.validation.fabric.attribution import NODE, Attribution
    from imagectl.validation.fabric.nodes import fabric_decision
    from imagectl.validation.fabric.phase import FabricOutcome
    from tests.support import make_receipt

    outcome = FabricOutcome(
        receipt=make_receipt("ami-1", "h100-training", "0" * 64),
        attribution=Attribution(NODE, nodes=["10.0.0.2"], reasons=["slow in every pair"]),
        together=None,
    )
    decision = fabric_decision(outcome, Decision(VALIDATED, ["2 host(s) passed"]))
    assert decision.verdict == INCONCLUSIVE
    check = ("fabric.attribution",)
    assert decision.bad_hosts == [BadHost("10.0.0.2", "10.0.0.2", check, check, ())]
    assert decision.to_dict()["bad_hosts"] == [
        {"host": "10.0.0.2", "instance_id": "10.0.0.2", "failed_checks": list(check),
         "hardware": list(check), "image_level": []}
    ]  # fmt: skip
