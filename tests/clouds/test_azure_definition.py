"""The gallery image definition, made or checked before Packer publishes into it, and
the validation VM's security profile following it (Compute REST API, Gallery Images -
Create Or Update: hyperVGeneration and the SecurityType feature are fixed at creation;
"Trusted launch for Azure virtual machines", Microsoft Learn)."""

from __future__ import annotations

import pytest

from imagectl.core.errors import UserError
from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]


def _provider(env: CloudEnv, **gallery: str):
    return env.provider_with({f"gallery.{key}": value for key, value in gallery.items()})


def _definition(fake, env: CloudEnv) -> dict:
    g = env.resolved.stack.clouds.azure.gallery
    rest = f"Microsoft.Compute/galleries/{g.name}/images/{g.image_definition}"
    return fake.resources[fake._key(fake.rid(g.resource_group, rest))]


def test_a_missing_definition_is_created_gen2_standard_once(azure_fake) -> None:
    env = CloudEnv("azure", azure_fake)
    provider = _provider(env)
    provider.prepare_build()
    props = _definition(azure_fake, env)["properties"]
    assert props["hyperVGeneration"] == "V2" and props["osState"] == "Generalized"
    assert not props.get("features")  # Standard security: no SecurityType feature
    puts = len(azure_fake.calls("PUT", "/images/[^/]+$"))
    provider.prepare_build()  # present and matching: checked, not written again
    assert len(azure_fake.calls("PUT", "/images/[^/]+$")) == puts == 1


def test_a_definition_that_differs_from_the_stack_is_a_user_error(azure_fake) -> None:
    env = CloudEnv("azure", azure_fake)
    _provider(env, security_type="TrustedLaunch").prepare_build()
    with pytest.raises(UserError) as info:
        _provider(env).prepare_build()  # the stack now says Standard
    text = str(info.value)
    assert "security type TrustedLaunch" in text and "asks for Standard" in text
    assert env.resolved.stack.clouds.azure.gallery.image_definition in text
    assert info.value.exit_code == 2


def test_a_trusted_launch_definition_gets_trusted_launch_validation_vms(azure_fake) -> None:
    env = CloudEnv("azure", azure_fake)
    image = env.seed_candidate()
    provider = _provider(env, security_type="TrustedLaunch")
    location = env.locations()[0]
    launch(provider, image, "Standard_ND96isr_H100_v5", location)
    (put,) = azure_fake.calls("PUT", "/virtualMachines/")
    assert put.body["properties"]["securityProfile"] == {
        "securityType": "TrustedLaunch",
        "uefiSettings": {"secureBootEnabled": True, "vTpmEnabled": True},
    }
    standard = _provider(env)
    launch(standard, image, "Standard_ND96isr_H100_v5", location)
    assert (
        "securityProfile" not in azure_fake.calls("PUT", "/virtualMachines/")[-1].body["properties"]
    )


def test_the_stack_with_trusted_launch_is_refused_by_the_compatibility_engine() -> None:
    from imagectl.compat.data import load_compat
    from imagectl.compat.engine import evaluate
    from imagectl.paths import find_workspace
    from imagectl.stacks.resolve import resolve
    from imagectl.stacks.schema import Stack
    from tests.fakes.fixtures import resolved_stack

    raw = resolved_stack().stack.model_dump(mode="json")
    data = load_compat(find_workspace().compat_dir)
    for security, fires in (("TrustedLaunch", True), ("Standard", False)):
        raw["clouds"]["azure"]["gallery"]["security_type"] = security
        combo = resolve(Stack.model_validate(raw), data).combination()
        fired = {v.rule for v in evaluate(combo, data)}
        assert ("AZURE-SECURE-BOOT-DKMS" in fired) is fires
