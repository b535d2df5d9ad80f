"""Cloud tags an adversary (anyone who may tag the account's resources) writes, on each
cloud's protocol fake through the providers' real SDK clients: what each tag decides must
not be bent by a hostile value, and every value imagectl prints stays inert.

- ``imagectl:managed``: which placements (and instances) the reaper may delete. Only the
  exact value ``true`` is imagectl's: look-alikes (another case, a trailing space, a
  full-width or Cyrillic letter, a NUL, a zero-width space) are another team's.
- ``imagectl:stack``: which images a stack's lookups find; a look-alike stack name is
  never this stack's.
- ``imagectl:launched-by``: the launcher the reaper reports, written by a run and
  rewritable by anyone: control characters, ANSI escapes, and text aimed at the shell,
  markdown and JSON writers come out inert on the terminal and exact in JSON.
- ``imagectl:image``: the image an instance reports (the tag is read where the cloud's
  own answer is not: GCP's label, Azure's tag when the VM has no image reference); a
  hostile value reaches the reaper's and drift's views only as inert text.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from imagectl.clouds.common import instance_tags
from imagectl.clouds.reap import reap_placements
from imagectl.tags import TAG_LAUNCHED_BY, TAG_MANAGED, TAG_STACK, gcp_label_value
from imagectl.validation.fabric.nodes import placement_name
from tests.fakes.fixtures import CloudEnv, launch

STACK = "h100-training"
LOOK_ALIKE_TRUE = ["True", "TRUE", "true ", " true", "\uff54rue", "tru\u0435", "true\u200b",
                   "true\x00", "yes", "1"]  # fmt: skip
LOOK_ALIKE_STACKS = ["H100-training", "h100-training ", "h100\u2010training", "h100-trainin\u0261",
                     "h100-training\x1b[0m", "h100_training"]  # fmt: skip
HOSTILE_LAUNCHER = (
    "ci\x1b[2K\x1b[1A\x1b]52;c;ZXZpbA==\x07 $(touch /tmp/pwned) `id` | **bold** |\n"
    '"},{"injected":true} \u202eevil\u202c nul\x00 bel\x07 del\x7f \x9b2J'
)
# EC2 answers in XML, which cannot carry C0 controls (XML 1.0, "Characters"): an EC2 tag
# holds the rest (EC2 "allows for any character in its tags", Tagging your resources)
XML_CANNOT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _held(env: CloudEnv, values: list[str]) -> list[str]:
    """The hostile values this cloud's API can hold at all."""
    return [v for v in values if env.cloud != "aws" or not XML_CANNOT.search(v)]


# what no terminal line may hold (tab and line feed are text)
FORBIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffe\uffff]"
)


def _shape(env: CloudEnv) -> str:
    return "p5.48xlarge" if env.cloud == "aws" else "x"


def test_a_look_alike_managed_tag_is_not_imagectls(cloud_env: CloudEnv) -> None:
    provider = cloud_env.provider()
    image = cloud_env.seed_candidate()
    location = cloud_env.locations()[0]

    def placement(managed: str) -> Any:
        tags = {**instance_tags(stack=STACK, image_id=image.image_id,
                                ttl=dt.timedelta(hours=-1), launched_by="dead-runner"),
                TAG_MANAGED: managed}  # fmt: skip
        made = provider.create_placement(name=placement_name(STACK), location=location,
                                         shape=_shape(cloud_env), count=2, tags=tags)  # fmt: skip
        assert made is not None
        return made

    ours = placement("true")
    others = [placement(value) for value in _held(cloud_env, LOOK_ALIKE_TRUE)]
    listed = {m.placement.name for m in provider.list_placements()}
    assert listed == {ours.name}, sorted(listed - {ours.name})
    reaped = {r.placement.placement.name: r.action for r in reap_placements(provider)}
    assert reaped == {ours.name: "deleted"}
    assert len(others) >= len(LOOK_ALIKE_TRUE) - 1


def test_a_look_alike_stack_tag_is_another_stack(cloud_env: CloudEnv) -> None:
    real = cloud_env.seed_candidate()
    for i, value in enumerate(_held(cloud_env, LOOK_ALIKE_STACKS)):
        cloud_env.seed_candidate(name=f"look-alike-{i}", tags={TAG_STACK: value})
    found = [i.image_id for i in cloud_env.provider().find_images(stack=STACK)]
    if cloud_env.cloud == "gcp":
        # a GCP label holds only [a-z0-9_-]: the look-alikes that encode to another value
        # are another stack; those the encoding folds into this one cannot be told apart
        # by any reader of labels (and GCP refuses upper case and spaces when set)
        folded = {gcp_label_value(v) for v in LOOK_ALIKE_STACKS} - {STACK}
        assert folded and len(found) == 1 + sum(
            gcp_label_value(v) == STACK for v in LOOK_ALIKE_STACKS), found  # fmt: skip
        assert real.image_id in found
    else:
        assert found == [real.image_id], found


def test_a_hostile_launcher_tag_is_inert_in_the_reapers_output(
    cli: Any, cloud_env: CloudEnv
) -> None:
    image = cloud_env.seed_candidate()
    hostile = HOSTILE_LAUNCHER if cloud_env.cloud != "aws" else XML_CANNOT.sub("", HOSTILE_LAUNCHER)
    inst = launch(cloud_env.provider(), image, _shape(cloud_env), cloud_env.locations()[0],
                  ttl=dt.timedelta(hours=-1), launched_by=hostile)  # fmt: skip
    # an orphan placement whose stack and launcher tags someone rewrote: the text view
    # prints its stack tag
    tags = {**instance_tags(stack=STACK, image_id=image.image_id, ttl=dt.timedelta(hours=-1),
                            launched_by=hostile), TAG_STACK: hostile}  # fmt: skip
    cloud_env.provider().create_placement(
        name=placement_name(STACK), location=cloud_env.locations()[0], shape=_shape(cloud_env),
        count=2, tags=tags,
    )  # fmt: skip
    text = cli("reap", "--cloud", cloud_env.cloud, "--stack", STACK, "--dry-run")
    assert text.code == 0, text.err
    shown = str(text.out) + str(text.err)
    assert "would-terminate" in shown and "would-delete" in shown and "placement" in shown, shown
    for line in shown.splitlines():
        assert not FORBIDDEN.search(line), repr(line)
    dry = cli("reap", "--cloud", cloud_env.cloud, "--stack", STACK, "--dry-run", "--json")
    assert dry.code == 0, dry.err
    rows = dry.json()["instances"]  # one JSON document: the injected object did not land
    assert [r["instance_id"] for r in rows] == [str(inst.instance_id)]
    assert set(rows[0]) >= {"launched_by", "stack", "action"} and "injected" not in rows[0]
    stored = inst.tags.get(TAG_LAUNCHED_BY)
    assert rows[0]["launched_by"] == stored  # exactly what the cloud holds, in JSON
    json.dumps(rows)  # and it writes back as JSON
    if cloud_env.cloud == "gcp":
        assert stored == gcp_label_value(hostile)  # a label holds no hostile byte


def test_a_hostile_image_tag_does_not_change_the_image_an_instance_reports(
    cloud_env: CloudEnv,
) -> None:
    """Someone rewrites an instance's ``imagectl:image`` after launch. AWS and Azure report
    the image the cloud says the instance booted (EC2's ImageId, the VM's image reference),
    whatever the tag says; GCP reports its label, which holds only [a-z0-9_-] (the boot
    disk's image costs a disk read per instance, and is read when the label is missing)."""
    import boto3

    from imagectl.tags import TAG_IMAGE

    image = cloud_env.seed_candidate()
    provider = cloud_env.provider()
    inst = launch(provider, image, _shape(cloud_env), cloud_env.locations()[0])
    hostile = 'ami-0\x1b[31mcurrent\u202e | `id` "}'
    if cloud_env.cloud == "aws":
        from imagectl.drift.fleet import region_of

        boto3.client("ec2", region_name=region_of("aws", inst.region)).create_tags(
            Resources=[inst.instance_id],
            Tags=[{"Key": TAG_IMAGE, "Value": XML_CANNOT.sub("", hostile)}],
        )
    elif cloud_env.cloud == "gcp":
        (raw,) = [v for k, v in cloud_env.fake.instances.items() if k[1] == inst.instance_id]
        raw["labels"]["imagectl-image"] = gcp_label_value(hostile)
    else:
        (raw,) = [v for k, v in cloud_env.fake.resources.items()
                  if k.endswith(f"/virtualmachines/{inst.instance_id.lower()}")]  # fmt: skip
        raw["tags"][TAG_IMAGE] = hostile
    (listed,) = [i for i in provider.list_instances() if i.instance_id == inst.instance_id]
    if cloud_env.cloud == "gcp":
        assert listed.image_id == gcp_label_value(hostile)
        assert re.fullmatch(r"[a-z0-9_-]+", listed.image_id), listed.image_id
    else:
        assert listed.image_id.lower().endswith(image.image_id.lower().rsplit("/", 1)[-1]), (
            listed.image_id, image.image_id)  # fmt: skip
