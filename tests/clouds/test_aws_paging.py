"""EC2's DescribeImages pages (``MaxResults`` / ``NextToken``: EC2 API reference,
"Pagination"); the emulator pages it too, and with two images a page here every
listing imagectl makes must follow ``NextToken`` to find them all."""

from __future__ import annotations

import boto3

from tests.fakes import moto_extensions
from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]


def test_the_emulator_pages_describe_images(aws_moto) -> None:
    env = CloudEnv("aws", aws_moto)
    seeded = {env.seed_candidate().image_id for _ in range(5)}
    moto_extensions.BEHAVIOUR.images_page_size = 2
    ec2 = boto3.client("ec2", region_name="us-east-1")
    first = ec2.describe_images(Owners=["self"])
    assert len(first["Images"]) == 2 and first["NextToken"]
    pages = list(ec2.get_paginator("describe_images").paginate(Owners=["self"]))
    assert len(pages) == 3 and not pages[-1].get("NextToken")
    assert {i["ImageId"] for p in pages for i in p["Images"]} == seeded


def test_finding_images_follows_every_page(aws_moto) -> None:
    env = CloudEnv("aws", aws_moto)
    seeded = {env.seed_candidate().image_id for _ in range(5)}
    moto_extensions.BEHAVIOUR.images_page_size = 2
    found = env.provider().find_images(stack="h100-training", region="us-east-1")
    assert {i.image_id for i in found} == seeded
