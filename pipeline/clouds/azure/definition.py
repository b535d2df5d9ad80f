"""The gallery image definition a build's versions go into: created when absent, checked
when present, before Packer runs (Packer's azure-arm builder publishes a version into an
existing definition and creates none).

Two of its properties decide how every VM made from the image boots, and neither can be
changed on an existing definition (Compute REST API, Gallery Images - Create Or Update:
``hyperVGeneration`` and ``features`` are set at creation):

- ``hyperVGeneration``: V2 (UEFI). The ND H100 v5, ND H200 v5 and NC/ND GPU sizes of the
  current generations run Generation 2 VMs ("Support for generation 2 VMs on Azure",
  Microsoft Learn).
- the ``SecurityType`` feature: absent for Standard security; ``TrustedLaunchSupported``
  lets a VM choose; ``TrustedLaunch`` makes every VM a Trusted Launch VM with Secure Boot,
  which loads only kernel modules signed by a key the firmware or shim trusts ("Trusted
  launch for Azure virtual machines"). The NVIDIA modules built by DKMS are signed by no
  such key unless a Machine Owner Key is enrolled, so such a definition needs signed
  modules; the compatibility rule AZURE-SECURE-BOOT-DKMS refuses the combination.

A mismatch between the stack and an existing definition is a user error naming the
definition and the field: a new definition (another ``gallery.image_definition``) is the
way to change either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagectl.core.errors import UserError

if TYPE_CHECKING:
    from azure.mgmt.compute import ComputeManagementClient
    from azure.mgmt.compute.models import GalleryImage

SECURITY_FEATURE = "SecurityType"
STANDARD = "Standard"


def _text(value: object) -> str:
    """An SDK enum member or a plain string, as the API's string."""
    return str(getattr(value, "value", value))


def security_type_of(raw: GalleryImage) -> str:
    """The definition's security type; Standard when it has no SecurityType feature."""
    for feature in getattr(raw.properties, "features", None) or []:
        if _text(feature.name).lower() == SECURITY_FEATURE.lower():
            return _text(feature.value)
    return STANDARD


def ensure_definition(
    compute: ComputeManagementClient,
    *,
    resource_group: str,
    gallery: str,
    name: str,
    location: str,
    hyper_v_generation: str,
    security_type: str,
) -> GalleryImage:
    """Return the definition, creating it when absent; refuse one that differs."""
    from azure.core.exceptions import ResourceNotFoundError
    from azure.mgmt.compute import models as m

    where = f"gallery image definition {gallery}/{name} (resource group {resource_group})"
    try:
        raw = compute.gallery_images.get(resource_group, gallery, name)
    except ResourceNotFoundError:
        raw = None
    if raw is not None:
        have_gen = _text((raw.properties and raw.properties.hyper_v_generation) or "V1")
        have_sec = security_type_of(raw)
        for field, have, want in (
            ("hyperVGeneration", have_gen, hyper_v_generation),
            ("security type", have_sec, security_type),
        ):
            if have.lower() != want.lower():
                raise UserError(
                    f"{where} has {field} {have}, but the stack asks for {want}; Azure "
                    "cannot change it on an existing definition",
                    hint=(
                        "Set clouds.azure.gallery to match the definition, or name a new "
                        "definition in clouds.azure.gallery.image_definition"
                    ),
                )
        return raw
    features = (
        []
        if security_type == STANDARD
        else [m.GalleryImageFeature(name=SECURITY_FEATURE, value=security_type)]
    )
    body = m.GalleryImage(
        location=location,
        properties=m.GalleryImageProperties(
            os_type="Linux",
            os_state="Generalized",
            hyper_v_generation=hyper_v_generation,
            identifier=m.GalleryImageIdentifier(publisher="imagectl", offer=gallery, sku=name),
            features=features or None,
        ),
    )
    return compute.gallery_images.begin_create_or_update(
        resource_group, gallery, name, body
    ).result()
