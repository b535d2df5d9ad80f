"""Azure gallery image versions are unique per build.

A version number is unique only within its image definition and each of its three parts
is a 32-bit integer (Azure REST API, Gallery Image Versions - Create Or Update:
"Allowed formats are Major.Minor.Patch ... Digits must be within the range of a 32-bit
integer"). Two stacks built in the same second used to get the same version.
"""

from __future__ import annotations

import datetime as dt

from imagectl.clouds.azure.spec import INT32_MAX, gallery_image_version
from imagectl.packer.build import new_build_id


def _parts(version: str) -> list[int]:
    parts = [int(p) for p in version.split(".")]
    assert len(parts) == 3 and all(0 <= p <= INT32_MAX for p in parts), version
    return parts


def test_builds_in_the_same_second_get_different_versions() -> None:
    now = dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)
    versions = {gallery_image_version(new_build_id(now)) for _ in range(200)}
    assert len(versions) == 200  # a 24-bit random suffix: no collision expected in 200
    for version in versions:
        assert _parts(version)[:2] == [2026, 1231235959]


def test_versions_sort_by_build_time() -> None:
    early = gallery_image_version("20261122-042530-ffffff")
    late = gallery_image_version("20261122-042531-000000")
    assert _parts(early) < _parts(late)
    assert gallery_image_version("20261122-042530-ab12cd") == "2026.1122042530.11211469"


def test_a_build_id_of_another_form_is_hashed_not_zeroed() -> None:
    a, b = gallery_image_version("nightly-a"), gallery_image_version("nightly-b")
    assert a != b and a != "0.0.0"
    _parts(a), _parts(b)
