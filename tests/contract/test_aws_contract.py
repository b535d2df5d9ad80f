"""The moto extensions (``tests/fakes/moto_extensions.py``) against botocore's installed
``service-2.json`` for EC2 and SSM: every request member they read and every response
member they write must exist in the operation's shapes, and the AMI members they set
must be members of DescribeImages' ``Image``. (Everything else moto answers is
serialized through the same botocore shapes, so it cannot carry foreign fields.)"""

from __future__ import annotations

import botocore.session
import pytest

from tests.fakes.moto_extensions import CONTRACT, IMAGE_MEMBERS, RESERVATION_MEMBERS


def _model(service: str):
    return botocore.session.get_session().get_service_model(service)


@pytest.mark.parametrize(("service", "operation"), sorted(CONTRACT))
def test_extension_reads_and_writes_real_members(service: str, operation: str) -> None:
    model = _model(service)
    assert operation in model.operation_names, f"{service} has no operation {operation}"
    op = model.operation_model(operation)
    reads, writes = CONTRACT[(service, operation)]
    inputs = set(op.input_shape.members) if op.input_shape else set()
    outputs = set(op.output_shape.members) if op.output_shape else set()
    assert not set(reads) - inputs, f"{operation} has no input {set(reads) - inputs}"
    assert not set(writes) - outputs, f"{operation} has no output {set(writes) - outputs}"


def test_image_members_set_by_the_emulator_exist() -> None:
    image = _model("ec2").shape_for("Image")
    assert not set(IMAGE_MEMBERS) - set(image.members)
    # the copy states the emulator walks through are EC2's ImageState values
    assert {"pending", "available", "failed"} <= set(image.members["State"].enum)


def test_capacity_reservation_members_set_by_the_emulator_exist() -> None:
    shape = _model("ec2").shape_for("CapacityReservation")
    assert not set(RESERVATION_MEMBERS) - set(shape.members)
    assert {"default", "capacity-block"} <= set(shape.members["ReservationType"].enum)


def test_the_production_calls_exist_with_the_members_used() -> None:
    """The members imagectl's AWS promotion sends that an emulator might silently drop."""
    ec2 = _model("ec2")
    copy = ec2.operation_model("CopyImage").input_shape.members
    assert {"ClientToken", "TagSpecifications", "SnapshotCopyCompletionDurationMinutes"} <= set(
        copy
    )
    deregister = ec2.operation_model("DeregisterImage").input_shape.members
    assert "DeleteAssociatedSnapshots" in deregister
    put = _model("ssm").operation_model("PutParameter").input_shape.members
    assert put["DataType"].type_name == "string"
