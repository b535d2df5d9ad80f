"""Azure (azure-mgmt-compute, azure-mgmt-network, azure-identity): Compute Gallery image
versions, validation VMs with their own NIC / NSG / public IP.

``clients`` builds the management clients (endpoint override, DefaultAzureCredential,
retry policy); ``errors`` maps ARM error codes; ``network`` owns the VM's NIC, NSG and
public IP; ``provider`` is the Provider.
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.azure.provider import AzureProvider


def create_provider(**options: Any) -> AzureProvider:
    return AzureProvider(**options)


__all__ = ["AzureProvider", "create_provider"]
