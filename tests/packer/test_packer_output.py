"""Parsing Packer's machine-readable lines and its manifest post-processor JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagectl.core.errors import UserError
from imagectl.packer.machine_readable import parse_line
from imagectl.packer.manifest import read_manifest


def test_parse_ui_line_with_escaped_commas_and_newlines() -> None:
    line = (
        "1795321574,,ui,say,==> amazon-ebs.candidate: Found Image ID: ami-1%!(PACKER_COMMA)"
        " name a%!(PACKER_COMMA)b\\nsecond line\n"
    )
    event = parse_line(line)
    assert event is not None
    assert (event.timestamp, event.target, event.type, event.ui_level) == (
        1795321574,
        "",
        "ui",
        "say",
    )
    assert event.text == "==> amazon-ebs.candidate: Found Image ID: ami-1, name a,b\nsecond line"
    assert not event.is_error


def test_parse_artifact_and_error_lines() -> None:
    art = parse_line("1795321574,amazon-ebs.candidate,artifact,0,id,us-east-1:ami-0abc")
    assert art is not None
    assert art.target == "amazon-ebs.candidate"
    assert art.data == ("0", "id", "us-east-1:ami-0abc")
    err = parse_line("1795321574,,ui,error,Build 'amazon-ebs.candidate' errored: boom")
    assert err is not None and err.is_error


@pytest.mark.parametrize("line", ["", "==> plain output", "abc,def,ghi", "123,only"])
def test_non_machine_readable_lines_are_not_events(line: str) -> None:
    assert parse_line(line) is None


def _manifest(tmp_path: Path, builds: list[dict], last: str) -> Path:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"builds": builds, "last_run_uuid": last}))
    return path


def test_manifest_keeps_last_run_and_splits_amazon_ids(tmp_path: Path) -> None:
    tags = {"imagectl:stack": "h100-training"}
    path = _manifest(
        tmp_path,
        [
            {
                "builder_type": "amazon-ebs",
                "artifact_id": "us-east-1:ami-old",
                "packer_run_uuid": "r1",
                "custom_data": tags,
            },
            {
                "builder_type": "amazon-ebs",
                "artifact_id": "us-east-1:ami-new",
                "packer_run_uuid": "r2",
                "custom_data": tags,
            },
        ],
        "r2",
    )
    arts = read_manifest(path, {"image_name": "imagectl-h100-training-x"})
    assert [(a.cloud, a.location, a.id, a.name) for a in arts] == [
        ("aws", "us-east-1", "ami-new", "imagectl-h100-training-x")
    ]
    assert arts[0].tags == tags


def test_manifest_gcp_azure_and_qemu(tmp_path: Path) -> None:
    path = _manifest(
        tmp_path,
        [
            {
                "builder_type": "googlecompute",
                "artifact_id": "imagectl-x-1",
                "packer_run_uuid": "r",
            },
            {
                "builder_type": "azure-arm",
                "artifact_id": "/subscriptions/s/.../images/m",
                "packer_run_uuid": "r",
            },
            {
                "builder_type": "qemu",
                "artifact_id": "VM",
                "packer_run_uuid": "r",
                "files": [{"name": "/b/output/imagectl-local-1.qcow2", "size": 1}],
            },
        ],
        "r",
    )
    v = {
        "gcp_project": "p",
        "azure_subscription_id": "sub",
        "azure_gallery_resource_group": "rg",
        "azure_gallery_name": "gal",
        "azure_gallery_image_definition": "def",
        "azure_gallery_image_version": "2026.1122.42530",
        "azure_location": "eastus",
    }
    gcp, azure, local = read_manifest(path, v)
    assert (gcp.cloud, gcp.id, gcp.location) == ("gcp", "imagectl-x-1", "p")
    assert azure.id == (
        "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/galleries/gal"
        "/images/def/versions/2026.1122.42530"
    )
    assert azure.location == "eastus"
    assert (local.cloud, local.id) == ("local", "/b/output/imagectl-local-1.qcow2")


def test_missing_or_broken_manifest_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        read_manifest(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops")
    with pytest.raises(UserError, match=r"bad.json:2"):
        read_manifest(bad)


def test_each_cloud_reads_its_own_builders_entry_and_an_unknown_builder_keeps_its_id(
    tmp_path: Path,
) -> None:
    """manifest.py names no builder: the cloud whose template uses the entry's builder
    reads it (CloudSpec.packer_artifacts), and an entry of a builder no registered cloud
    uses keeps its artifact id."""
    from imagectl.clouds.registry import specs

    files = [{"name": "/o/x.qcow2"}]
    entries = [
        {"builder_type": s.packer_builder, "artifact_id": "x:y", "packer_run_uuid": "r",
         "files": files}
        for s in specs().values()
    ]  # fmt: skip
    entries.append({"builder_type": "oracle-oci", "artifact_id": "ocid1.image.oc1..aaa",
                    "packer_run_uuid": "r"})  # fmt: skip
    found = read_manifest(_manifest(tmp_path, entries, "r"), {"image_name": "img"})
    assert [a.cloud for a in found] == [*specs(), "oracle-oci"]
    assert (found[-1].id, found[-1].location, found[-1].name) == ("ocid1.image.oc1..aaa", "", "img")
