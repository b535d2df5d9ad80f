"""A validator that stops with exit 2 (bad input: its one-paragraph error on stderr) is
named with what it said: the host's problem carries the error's tail, so the reason a run
is inconclusive is on the controller, not only on a host that was just terminated.

Before, the problem read "the validator crashed or timed out: Run the validator: rc=2:
non-zero return code" (Ansible's ``msg``), and the validator's own words (which file,
what to do) were lost with the instance. What a host wrote goes through the one
sanitizer (``imagectl.core.safetext.plain``): an escape sequence in it never reaches a
terminal or the catalog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.clouds.scenario import HEALTHY, stand_in_validator, write_override
from tests.fakes.fixtures import CloudEnv

SAID = "a .pth file is writable by uid 1000, not this user or root. Fix: chown it"


def test_the_validators_own_error_is_the_hosts_problem(
    cli: Any, aws_moto: Any, tmp_path: Path
) -> None:
    env = CloudEnv("aws", aws_moto)
    # the validator's way to refuse: exit 2 and one paragraph on stderr (here with an
    # escape sequence that would clear the operator's screen, and a line break)
    crash = stand_in_validator(
        tmp_path / "validator", f"printf 'imagectl: \\033[2J{SAID}\\n  hint\\n' >&2", "exit 2"
    )
    slot = {"validate_snapshot": HEALTHY, "validate_imagectl": str(crash)}
    override = write_override(tmp_path, [slot], cloud="aws")
    image = env.seed_candidate()
    r = cli("validate-image", image.image_id, "--cloud", "aws", "--stack", "h100-training",
            "--inventory-override", str(override), "--reach-timeout", "2", "--json")  # fmt: skip
    data = r.json()
    assert data["verdict"] == "inconclusive", data
    (host,) = data["hosts"]
    assert "the validator crashed or timed out" in host["problem"]
    assert "rc=2" in host["problem"] and SAID in host["problem"], host
    assert "\x1b" not in r.out and "\x1b" not in host["problem"]
    assert env.live_instances() == []
