"""The AWS candidate's root volume is sized by the stack (the base AMI's 8 GiB cannot hold
the CUDA toolkit): clouds.aws.build.root_volume_gb -> Packer's aws_root_volume_gb ->
launch_block_device_mappings (``packer validate`` of the template: test_packer_validate)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from imagectl.packer.variables import packer_vars
from imagectl.stacks import load_resolved
from imagectl.stacks.schema import Stack

IMAGES = Path(__file__).resolve().parents[2] / "images"


def test_the_root_volume_size_goes_from_the_stack_to_packer() -> None:
    _, resolved = load_resolved(IMAGES, "h100-training")
    assert packer_vars(resolved, "aws")["aws_root_volume_gb"] == 100  # the default
    raw = resolved.stack.model_dump(mode="json")
    raw["clouds"]["aws"]["build"]["root_volume_gb"] = 250
    bigger = resolved.__class__(**{**resolved.__dict__, "stack": Stack.model_validate(raw)})
    assert packer_vars(bigger, "aws")["aws_root_volume_gb"] == 250
    template = (IMAGES / "aws" / "candidate.pkr.hcl").read_text()
    assert "volume_size           = var.aws_root_volume_gb" in template
    assert "aws_polling {" in template


def test_a_root_volume_smaller_than_the_base_ami_is_refused() -> None:
    _, resolved = load_resolved(IMAGES, "h100-training")
    raw = resolved.stack.model_dump(mode="json")
    raw["clouds"]["aws"]["build"]["root_volume_gb"] = 4
    with pytest.raises(ValidationError, match="greater than or equal to 8"):
        Stack.model_validate(raw)
