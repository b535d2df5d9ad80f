"""The stack schema's ``clouds:`` sections come from the registered clouds:
each cloud's section model lives in its folder and reaches the schema through the
``stacks.sections`` hook. What the schema still decides from them: a fabric pinned in
``network`` needs a cloud of the stack that installs it; a section is read by name or by
its model, never by attribute; and an absent builtin section stays in the stack digest as
it was (digests bound in receipts and manifests do not move)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imagectl.clouds.aws.stack import AwsCloud
from imagectl.clouds.local.stack import LocalCloud
from imagectl.clouds.registry import BUILTIN, specs
from imagectl.stacks import load_resolved
from imagectl.stacks.schema import clouds_model
from imagectl.stacks.sections import sections

REPO = Path(__file__).resolve().parents[2]


def test_the_sections_are_the_registered_clouds_in_the_registrys_order() -> None:
    assert tuple(sections()) == tuple(BUILTIN) == tuple(specs())
    assert tuple(clouds_model().model_fields) == tuple(BUILTIN)
    for name, spec in specs().items():
        assert spec.section.name == name and spec.fabrics == spec.section.fabrics


def test_a_section_is_read_by_name_or_by_its_model() -> None:
    _, resolved = load_resolved(REPO / "images", "h100-training")
    clouds = resolved.stack.clouds
    aws = clouds.section_of(AwsCloud)
    assert aws is not None and aws is clouds.section("aws")
    assert clouds.section_of(LocalCloud) is None and clouds.section("local") is None
    assert list(clouds.enabled()) == ["aws", "gcp", "azure"]


def test_absent_builtin_sections_stay_in_the_digest() -> None:
    """The body digested names every builtin cloud, null where absent, as before the
    sections moved into the clouds' folders."""
    _, resolved = load_resolved(REPO / "images", "local")
    body = resolved.stack.model_dump(mode="json")["clouds"]
    assert body == {"aws": None, "gcp": None, "azure": None, "local": body["local"]}
    assert body["local"] is not None


def test_a_fabric_no_cloud_of_the_stack_installs_is_refused(cli: Any, workspace_copy: Path) -> None:
    path = workspace_copy / "images" / "stacks" / "h100-training.yaml"
    text = path.read_text()
    start, end = text.index("\n  aws:\n"), text.index("\n  gcp:\n")
    path.write_text(text[:start] + text[end:])  # no aws cloud; network.efa stays
    result = cli("--root", str(workspace_copy), "plan", "--stack", "h100-training", "--offline")
    assert result.code == 2
    message = " ".join(result.err.split())
    assert "network.efa is set but none of the stack's clouds installs it" in message
    assert "add a cloud that does (aws) or remove network.efa" in message
    assert "Traceback" not in result.err
