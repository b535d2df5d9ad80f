"""EC2 calls that moto (5.2.5) lacks, added at its protocol layer.

moto answers an action by calling the method of the same (snake_case) name on its EC2
response class; these methods are added there, so boto3 talks to them over moto's own
request parsing and response serialization, in process (``mock_aws``) and through
``ThreadedMotoServer`` alike. Each keeps EC2's documented behaviour that the
production code relies on, nothing more.

- ``EnableImageDeprecation(ImageId, DeprecateAt)``: sets the AMI's ``DeprecationTime``
  (then returned by ``DescribeImages``); an unknown AMI is ``InvalidAMIID.NotFound``.
- ``DisableImageDeprecation(ImageId)``: clears it.
"""

from __future__ import annotations

from typing import Any


def install() -> None:
    """Add the calls to moto's EC2 responses (idempotent)."""
    from moto.core.responses import ActionResult
    from moto.ec2.responses.amis import AmisResponse

    if getattr(AmisResponse, "_imagectl_extended", False):
        return

    def enable_image_deprecation(self: Any) -> ActionResult:
        ami_id = self._get_param("ImageId")
        when = self._get_param("DeprecateAt")
        self.error_on_dryrun()
        (ami,) = self.ec2_backend.describe_images(ami_ids=[ami_id])  # NotFound for unknown
        ami.deprecation_time = when
        return ActionResult({"Return": True})

    def disable_image_deprecation(self: Any) -> ActionResult:
        ami_id = self._get_param("ImageId")
        self.error_on_dryrun()
        (ami,) = self.ec2_backend.describe_images(ami_ids=[ami_id])
        ami.deprecation_time = None
        return ActionResult({"Return": True})

    AmisResponse.enable_image_deprecation = enable_image_deprecation  # type: ignore[attr-defined]
    AmisResponse.disable_image_deprecation = disable_image_deprecation  # type: ignore[attr-defined]
    AmisResponse._imagectl_extended = True  # type: ignore[attr-defined]
