"""Each cloud's image identity is data (validators/data/clouds.yaml ``identity``):
one entry per registered cloud, with its source, and the code that reads it names no
cloud. The comparisons themselves are tests/promotion/test_image_identity.py's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from imagectl.clouds.registry import BUILTIN
from imagectl.validators.attestation import _cloud_of
from imagectl.validators.host.clouds import cloud_hints
from imagectl.validators.identity import PARTS, Grammar, ImageRef, from_subject, grammar, parse

# one observed id per cloud, as its documents give it
OBSERVED = {
    "aws": "arn:aws:ec2:us-east-1:111122223333:image/ami-0123456789abcdef0",
    "gcp": "projects/prod-images/global/images/h100-training-20261122@4471934671284321",
    "azure": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/"
    "Microsoft.Compute/galleries/g/images/h100-training/versions/2026.1122.1",
    "local": "sha256:" + "a" * 64,
}


def test_every_registered_cloud_has_an_identity_with_its_source() -> None:
    clouds = cloud_hints().clouds
    assert tuple(clouds) == tuple(BUILTIN) == tuple(OBSERVED)
    for name, hints in clouds.items():
        entry = hints.identity
        assert entry is not None and entry.source and entry.observed and entry.recognise, name
        assert set(entry.labels) <= set(PARTS) and "name" in entry.labels, name
        assert ("region" in entry.labels) == (entry.image_scope == "regional"), name


@pytest.mark.parametrize("cloud", list(OBSERVED))
def test_each_clouds_id_is_recognised_and_its_signed_form_reads_back(cloud: str) -> None:
    assert _cloud_of(OBSERVED[cloud]) == cloud
    ref = parse(cloud, OBSERVED[cloud], "us-east-1")
    assert ref.name is not None
    assert from_subject(f"image:{ref.text()}") == ref


def test_a_cloud_the_data_does_not_describe_is_region_and_id() -> None:
    ref = parse("elsewhere", "zone-1/img-7")
    assert ref == ImageRef("elsewhere", "zone-1/img-7")
    assert ImageRef("elsewhere", "img-7", "zone-1").text() == "elsewhere/zone-1/img-7"
    assert from_subject("image:elsewhere/zone-1/img-7") == ImageRef("elsewhere", "img-7", "zone-1")
    assert grammar("elsewhere").labels == {p: p for p in PARTS}


@pytest.mark.parametrize(
    "entry, why",
    [
        ({"observed": ["(?P<name>"]}, "not a regular expression"),
        ({"labels": {"zone": "zone"}}, "unknown identity parts"),
        ({"image_scope": "planetary"}, "regional"),
    ],
)
def test_a_bad_entry_is_refused_naming_what_is_wrong(entry: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Grammar.model_validate(entry)
    assert why in str(caught.value)
