"""The build instance is reachable from the runner only and requires IMDSv2, and the AMI
is registered so that its instances do too; Google Cloud and Azure get their equivalents,
and Azure's home region its replica count and storage type like every other region.

Sources: Packer amazon-ebs ``temporary_security_group_source_cidrs`` (default 0.0.0.0/0),
``imds_support`` and ``metadata_options``; EC2 User Guide, "Configure the AMI"
(ImdsSupport=v2.0); Packer azure-arm ``allowed_inbound_ip_addresses``,
``shared_image_gallery_replica_count`` and the destination's ``storage_account_type``;
Compute Engine "Shielded VM" and metadata ``serial-port-enable``. ``packer validate`` of
every template with every stack runs in test_packer_validate.py (Packer 1.6.6, with the
plugin-only lines stripped)."""

from __future__ import annotations

import re

import pytest

from imagectl.packer.templates import PLUGIN_ONLY_BEGIN, PLUGIN_ONLY_END, without_plugin_only
from imagectl.packer.variables import packer_vars
from imagectl.stacks import load_resolved
from tests.support import ROOT

IMAGES = ROOT / "images"


def _text(cloud: str) -> str:
    return (IMAGES / cloud / "candidate.pkr.hcl").read_text()


def _plugin_only(text: str) -> str:
    inside = re.findall(
        re.escape(PLUGIN_ONLY_BEGIN) + r"(.*?)" + re.escape(PLUGIN_ONLY_END), text, re.S
    )
    return "".join(inside)


def test_no_template_opens_ssh_to_the_internet() -> None:
    for cloud in ("aws", "azure", "gcp"):
        assert "0.0.0.0/0" not in _text(cloud), cloud


def test_aws_temporary_ssh_admits_the_runner_only() -> None:
    text = _text("aws")
    (line,) = [ln for ln in text.splitlines() if "temporary_security_group_source_cidrs" in ln]
    assert "var.ssh_source_cidrs" in line and '"127.0.0.1/32"' in line


def test_aws_build_instance_and_ami_require_imdsv2_with_current_packer() -> None:
    inside = _plugin_only(_text("aws"))
    assert re.search(r'imds_support\s*=\s*"v2\.0"', inside)
    assert re.search(r'http_tokens\s*=\s*"required"', inside)
    stripped = without_plugin_only(_text("aws"))  # what Packer 1.6.6 is given
    assert "imds_support" not in stripped and "metadata_options" not in stripped
    assert "temporary_security_group_source_cidrs" in stripped


def test_azure_build_nsg_and_home_region_replicas() -> None:
    text = _text("azure")
    assert re.search(r"allowed_inbound_ip_addresses\s*=.*var\.ssh_source_cidrs", text)
    assert re.search(r"shared_image_gallery_replica_count\s*=\s*var\.azure_replica_count", text)
    assert re.search(r"storage_account_type\s*=\s*var\.azure_storage_account_type",
                     _plugin_only(text))  # fmt: skip


def test_gcp_build_vm_has_no_serial_port_and_a_vtpm() -> None:
    text = _text("gcp")
    assert re.search(r'serial-port-enable\s*=\s*"FALSE"', text)
    assert re.search(r"enable_vtpm\s*=\s*true", text)
    assert re.search(r"enable_integrity_monitoring\s*=\s*true", text)


@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_the_runner_cidr_is_fed_to_packer(cloud: str, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = load_resolved(IMAGES, "h100-training")[1]
    monkeypatch.delenv("IMAGECTL_RUNNER_CIDR", raising=False)
    assert packer_vars(resolved, cloud)["ssh_source_cidrs"] == []
    monkeypatch.setenv("IMAGECTL_RUNNER_CIDR", "203.0.113.7/32")
    assert packer_vars(resolved, cloud)["ssh_source_cidrs"] == ["203.0.113.7/32"]


def test_azure_home_region_gets_the_stacks_replicas() -> None:
    resolved = load_resolved(IMAGES, "h100-training")[1]
    gallery = resolved.stack.clouds.azure.gallery
    fed = packer_vars(resolved, "azure")
    assert fed["azure_replica_count"] == gallery.replica_count
    assert fed["azure_storage_account_type"] == gallery.storage_account_type


def test_stripping_keeps_everything_outside_the_marks() -> None:
    text = f"a\n  {PLUGIN_ONLY_BEGIN}\n  x = 1\n  {PLUGIN_ONLY_END}\nb\n"
    assert without_plugin_only(text) == "a\nb\n"


def test_the_build_region_image_is_encrypted_with_its_stack_key() -> None:
    resolved = load_resolved(IMAGES, "h100-training")[1]
    aws = resolved.stack.clouds.aws
    assert packer_vars(resolved, "aws")["aws_kms_key_id"] == ""  # no key: account default
    key = f"arn:aws:kms:{aws.build.region}:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    keyed = resolved.stack.model_copy(
        update={"clouds": resolved.stack.clouds.model_copy(update={
            "aws": aws.model_copy(update={"kms_key_ids": {aws.build.region: key}})})})  # fmt: skip
    assert packer_vars(resolved.__class__(**{**vars(resolved), "stack": keyed}),
                       "aws")["aws_kms_key_id"] == key  # fmt: skip
    text = _text("aws")
    assert re.search(r'encrypt_boot\s*=\s*var\.aws_kms_key_id != ""', text)
    assert re.search(r"kms_key_id\s*=\s*var\.aws_kms_key_id", text)
