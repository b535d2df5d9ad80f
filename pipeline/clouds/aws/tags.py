"""EC2 tags on the wire (``[{"Key": ..., "Value": ...}]``) <-> a plain dict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import TagTypeDef


def tag_dict(raw: Sequence[TagTypeDef] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw or []}


def tag_list(tags: dict[str, str]) -> list[TagTypeDef]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]
