"""`imagectl lint` knows each cloud's names (images/compat/regions.yaml) and refuses
documentation placeholder ids (images/compat/placeholders.yaml) unless the stack is an
example. Expected verdicts from the clouds' documents: AWS has us-east-2 and no
us-eats-2; Cloud Storage's multi-regions are us, eu and asia (no "europe", and an image's
storageLocations are "regional or multi-regional", so no dual-region such as eur4);
Compute Engine's us-central1 has zones a, b, c and f (no us-central1-e); Azure has no
eastus4; the nil UUID is no subscription; o-exampleorgid is AWS Organizations' example."""

from __future__ import annotations

from pathlib import Path

from tests.stacks.test_lint_and_plan import edit, line_of, rules_of


def lint(cli, ws: Path, stack: str):
    return cli("--root", str(ws), "lint", "--stack", stack, "--json")


def test_an_aws_region_typo_fails_with_the_near_miss(cli, workspace_copy: Path) -> None:
    path = edit(workspace_copy, "h100-training", "[us-east-1, us-east-2,", "[us-east-1, us-eats-2,")
    result = lint(cli, workspace_copy, "h100-training")
    assert result.code == 1
    [problem] = rules_of(result.json(), "h100-training")["LOCATION-UNKNOWN"]
    assert problem["severity"] == "error"
    assert "'us-eats-2' is not an AWS region" in problem["message"]
    assert "did you mean 'us-east-2'?" in problem["fix"]
    assert problem["where"].endswith(f":{line_of(path, 'us-eats-2')}")
    assert "aws-regions" in problem["source"]


def test_europe_is_not_a_cloud_storage_location(cli, workspace_copy: Path) -> None:
    path = edit(workspace_copy, "h100-training", "regions: [us, eu]", "regions: [us, europe]")
    result = lint(cli, workspace_copy, "h100-training")
    assert result.code == 1
    [problem] = rules_of(result.json(), "h100-training")["LOCATION-UNKNOWN"]
    assert "'europe' is not a Cloud Storage location" in problem["message"]
    assert "did you mean 'eu'?" in problem["fix"] and "us, eu, asia" in problem["fix"]
    assert "storage/docs/locations" in problem["source"]
    assert problem["where"].endswith(f":{line_of(path, 'regions: [us, europe]')}")


def test_storage_regions_and_multi_regions_pass_a_dual_region_does_not(
    cli, workspace_copy: Path
) -> None:
    edit(workspace_copy, "h100-training", "regions: [us, eu]", "regions: [asia, europe-west4]")
    assert "LOCATION-UNKNOWN" not in rules_of(
        lint(cli, workspace_copy, "h100-training").json(), "h100-training"
    )
    edit(workspace_copy, "h100-training", "regions: [asia, europe-west4]", "regions: [eur4]")
    [problem] = rules_of(lint(cli, workspace_copy, "h100-training").json(), "h100-training")[
        "LOCATION-UNKNOWN"
    ]
    assert "'eur4'" in problem["message"]


def test_gcp_zone_and_azure_location_typos(cli, workspace_copy: Path) -> None:
    edit(workspace_copy, "h100-training", "zone: us-central1-a", "zone: us-central1-e")
    edit(workspace_copy, "h100-training", "[eastus, westus3,", "[eastus, eastus4,")
    problems = rules_of(lint(cli, workspace_copy, "h100-training").json(), "h100-training")[
        "LOCATION-UNKNOWN"
    ]
    messages = sorted(p["message"] for p in problems)
    assert messages == [
        "'eastus4' is not an Azure location",
        "'us-central1-e' is not a Compute Engine zone",
    ]


def test_shipped_examples_warn_about_their_placeholders(cli) -> None:
    body = cli("lint", "--stack", "h100-training", "--json").json()
    found = rules_of(body, "h100-training")["PLACEHOLDER"]
    assert {p["severity"] for p in found} == {"warning"}
    texts = " ".join(p["message"] for p in found)
    for placeholder in (
        "o-exampleorgid",
        "00000000-0000-0000-0000-000000000000",
        "imagectl-images",
    ):
        assert placeholder in texts
    assert body["ok"] is True


def test_placeholders_are_refused_unless_the_stack_is_an_example(cli, workspace_copy: Path) -> None:
    path = edit(workspace_copy, "h100-training", "example: true\n", "")
    result = lint(cli, workspace_copy, "h100-training")
    assert result.code == 1
    found = {
        p["where"].rsplit(":", 1)[1]: p
        for p in rules_of(result.json(), "h100-training")["PLACEHOLDER"]
    }
    assert {p["severity"] for p in found.values()} == {"error"}
    subscription = found[str(line_of(path, "subscription_id:"))]
    assert "all-zero subscription id" in subscription["message"]
    assert "az account show" in subscription["fix"] and "RFC 9562" in subscription["source"]
    assert str(line_of(path, "o-exampleorgid")) in found
    assert str(line_of(path, "project: imagectl-images")) in found


def test_an_example_organization_under_a_real_account_is_still_refused(
    cli, workspace_copy: Path
) -> None:
    edit(workspace_copy, "h100-training", "example: true\n", "")
    edit(workspace_copy, "h100-training", "::111122223333:", "::210987654321:")
    edit(
        workspace_copy,
        "h100-training",
        '"00000000-0000-0000-0000-000000000000"',
        '"9b2c1a8e-4f11-4d5e-a0a7-3c1b7e2d9f10"',
    )
    edit(workspace_copy, "h100-training", "project: imagectl-images", "project: ml-images-prod")
    result = lint(cli, workspace_copy, "h100-training")
    [problem] = rules_of(result.json(), "h100-training")["PLACEHOLDER"]
    assert "AWS Organizations documentation example" in problem["message"]
    assert result.code == 1


def test_real_ids_pass_and_the_example_flag_is_not_a_pin(cli, workspace_copy: Path) -> None:
    from imagectl.stacks.loader import load_stack
    from imagectl.stacks.resolve import stack_digest

    path = workspace_copy / "images" / "stacks" / "inference-l4-a10g.yaml"
    before = stack_digest(load_stack(path).stack)
    edit(workspace_copy, "inference-l4-a10g", "example: true\n", "")
    assert stack_digest(load_stack(path).stack) == before
    edit(workspace_copy, "inference-l4-a10g", '["111122223333"]', '["210987654321"]')
    edit(workspace_copy, "inference-l4-a10g", "project: imagectl-images", "project: ml-images-prod")
    result = lint(cli, workspace_copy, "inference-l4-a10g")
    assert result.code == 0
    assert "PLACEHOLDER" not in rules_of(result.json(), "inference-l4-a10g")
