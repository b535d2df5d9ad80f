"""``clouds.aws.kms_key_ids``: each key is of its own region, and each region is one a copy
is made in. CopyImage's ``KmsKeyId`` "must exist in the destination Region", and KMS
checks the key asynchronously, so a wrong one fails after the copy has started (EC2 API
reference, CopyImage): lint refuses it before any spend, naming the file, the region and
what to do (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

STACK = "h100-training"
KEY = "arn:aws:kms:{region}:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _with_keys(root: Path, keys: dict[str, str]) -> None:
    path = root / "images" / "stacks" / f"{STACK}.yaml"
    text = path.read_text()
    block = "    kms_key_ids:\n" + "".join(f'      {r}: "{k}"\n' for r, k in keys.items())
    marker = "    regions: [us-east-1, us-east-2, us-west-2, eu-west-1]\n"
    assert marker in text
    path.write_text(text.replace(marker, marker + block, 1))


def _lint(cli: Any, root: Path) -> Any:
    return cli("--root", str(root), "lint", "--stack", STACK)


def test_keys_of_their_own_target_regions_pass(cli: Any, workspace_copy: Path) -> None:
    _with_keys(workspace_copy, {r: KEY.format(region=r) for r in ("us-east-1", "eu-west-1")})
    result = _lint(cli, workspace_copy)
    assert result.code == 0, result.out + result.err


@pytest.mark.parametrize(
    ("keys", "words"),
    [
        ({"us-east-2": KEY.format(region="us-west-2")}, "is in us-west-2, not us-east-2"),
        ({"ap-south-1": KEY.format(region="ap-south-1")}, "ap-south-1 is not a target region"),
    ],
)
def test_a_key_of_another_region_or_for_no_target_is_refused(
    cli: Any, workspace_copy: Path, keys: dict[str, str], words: str
) -> None:
    _with_keys(workspace_copy, keys)
    result = _lint(cli, workspace_copy)
    out = result.out + result.err
    assert result.code == 2, out
    assert words in out and f"{STACK}.yaml" in out and "kms_key_ids" in out
    assert "Traceback" not in out
