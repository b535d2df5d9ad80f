"""``validate-image``'s run options, each shown to change the run (on moto's EC2, the
real boto3 calls; the host is this machine through Ansible's local connection, its
validator a stand-in that records what it was given and replays nothing):

- ``--profile``: the validator on the host is run with that profile (``validate
  --profile burn``), not the stack's ``validation.profile`` (quick).
- ``--location``: the instance is launched in the zone named, not the stack's first.
- ``--ttl``: the instance's ``imagectl:expires-at`` tag (what ``imagectl reap`` acts on)
  is launch time plus that many hours (3 by default).
- ``--validator-timeout``: a validator that hangs is ended at that many seconds; the run
  is inconclusive with the host's problem named, long before the hang would end.
- ``--wheel``: the wheel given is shipped, installed in a venv of its own on the host and
  its ``imagectl`` is the validator that runs (not the host's).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import boto3

from imagectl.tags import TAG_TTL
from tests.clouds.scenario import HEALTHY, stand_in_validator, write_override
from tests.fakes.fixtures import CloudEnv
from tests.supply.tiny_wheels import tiny_wheel

STACK = "h100-training"


def _stand_in(tmp_path: Path, *, sleep_s: int = 0) -> tuple[Path, Path]:
    """A validator that writes its argv to a file, reads its input, then fails as a crash
    would (exit 3: no receipt) after sleeping ``sleep_s``."""
    seen = tmp_path / "argv"
    script = stand_in_validator(
        tmp_path / "validator", f'printf "%s\\n" "$@" > {seen}', f"sleep {sleep_s}", "exit 3"
    )
    return script, seen


def _run(
    cli: Any, moto: Any, tmp_path: Path, *options: str, sleep_s: int = 0
) -> tuple[Any, list[str]]:
    env_dir = tmp_path / "run"
    env_dir.mkdir(parents=True)
    script, seen = _stand_in(env_dir, sleep_s=sleep_s)
    slot = {"validate_snapshot": HEALTHY, "validate_imagectl": str(script)}
    override = write_override(env_dir, [slot], cloud="aws")
    image = CloudEnv("aws", moto).seed_candidate()
    r = cli("validate-image", image.image_id, "--cloud", "aws", "--stack", STACK,
            "--inventory-override", str(override), "--reach-timeout", "2", "--json",
            *options)  # fmt: skip
    return r, (seen.read_text().split("\n") if seen.exists() else [])


def _instances() -> list[dict[str, Any]]:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


def _profile(argv: list[str]) -> str:
    return argv[argv.index("--profile") + 1]


def test_profile_is_the_one_the_host_runs(cli: Any, aws_moto: Any, tmp_path: Path) -> None:
    _, default = _run(cli, aws_moto, tmp_path / "a")
    _, burn = _run(cli, aws_moto, tmp_path / "b", "--profile", "burn")
    assert default[0] == "validate" and _profile(default) == "quick", default
    assert _profile(burn) == "burn", burn


def test_location_is_the_zone_launched_in(cli: Any, aws_moto: Any, tmp_path: Path) -> None:
    first, _ = _run(cli, aws_moto, tmp_path / "a")
    default = first.json()["launched"][0]["location"]
    chosen = "us-east-1d" if default == "us-east-1c" else "us-east-1c"
    r, _ = _run(cli, aws_moto, tmp_path / "b", "--location", chosen)
    assert [h["location"] for h in r.json()["launched"]] == [chosen], r.json()
    placed = {i["InstanceId"]: i["Placement"]["AvailabilityZone"] for i in _instances()}
    assert placed[r.json()["launched"][0]["instance_id"]] == chosen


def test_ttl_is_the_expiry_tag_reap_reads(cli: Any, aws_moto: Any, tmp_path: Path) -> None:
    r3, _ = _run(cli, aws_moto, tmp_path / "a")
    r1, _ = _run(cli, aws_moto, tmp_path / "b", "--ttl", "0.5")
    by_id = {i["InstanceId"]: i for i in _instances()}

    def lifetime_h(r: Any) -> float:
        inst = by_id[r.json()["launched"][0]["instance_id"]]
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
        expires = dt.datetime.fromisoformat(tags[TAG_TTL])
        return (expires - inst["LaunchTime"]).total_seconds() / 3600

    assert abs(lifetime_h(r3) - 3.0) < 0.1 and abs(lifetime_h(r1) - 0.5) < 0.1


def test_validator_timeout_ends_a_hung_validator(cli: Any, aws_moto: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    r, argv = _run(cli, aws_moto, tmp_path / "a", "--validator-timeout", "3", sleep_s=120)
    took = time.monotonic() - started
    data = r.json()
    assert argv and data["verdict"] == "inconclusive", data
    (host,) = data["hosts"]
    assert "the validator crashed or timed out" in host["problem"], host
    assert took < 100, took  # ended by the timeout, not by the validator's 120 s
    assert CloudEnv("aws", aws_moto).live_instances() == []


def _validator_wheel(folder: Path, seen: Path) -> Path:
    """A real wheel whose console script ``imagectl`` records its argv in ``seen``, reads
    its input and exits 3 (no receipt): the shape of imagectl's own wheel to pip."""
    source = (
        "import pathlib, sys\n\n\ndef main():\n"
        f"    pathlib.Path({str(seen)!r}).write_text('\\n'.join(sys.argv[1:]))\n"
        "    sys.stdin.read()\n    return 3\n"
    )
    return tiny_wheel(folder, "imagectl_stand_in", "1.0", source=source,
                      console_scripts={"imagectl": "imagectl_stand_in:main"})  # fmt: skip


def test_wheel_is_the_validator_the_host_runs(cli: Any, aws_moto: Any, tmp_path: Path) -> None:
    shipped_seen = tmp_path / "shipped-argv"
    wheel = _validator_wheel(tmp_path / "dist", shipped_seen)
    _, host_argv = _run(cli, aws_moto, tmp_path / "a")
    assert host_argv and not shipped_seen.exists()  # without it: the host's validator
    r, host_again = _run(cli, aws_moto, tmp_path / "b", "--wheel", str(wheel))
    assert host_again == [], "the host's own validator ran although a wheel was given"
    shipped = shipped_seen.read_text().split("\n")
    assert shipped[0] == "validate" and "--image-id" in shipped, shipped
    assert r.json()["verdict"] == "inconclusive"  # exit 3, no receipt: named, not passed
