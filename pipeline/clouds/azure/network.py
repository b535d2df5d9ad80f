"""The validation VM's network: an NSG admitting SSH from the runner only, a public IP
only when the runner connects over the internet, and the NIC. All tagged like the VM.

Without ``subnet_id`` a small virtual network (``imagectl-validation``) is created once
in the validation resource group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagectl.clouds.azure.errors import is_not_found
from imagectl.clouds.common import check_cidr
from imagectl.tags import TAG_MANAGED

if TYPE_CHECKING:
    from azure.mgmt.network import NetworkManagementClient

VNET = "imagectl-validation"
VNET_CIDR = "10.42.0.0/16"
SUBNET_CIDR = "10.42.0.0/24"


def ensure_subnet(
    network: NetworkManagementClient, rg: str, location: str, subnet_id: str | None
) -> str:
    if subnet_id:
        return subnet_id
    from azure.core.exceptions import HttpResponseError

    try:
        vnet = network.virtual_networks.get(rg, VNET)
    except HttpResponseError as exc:
        if not is_not_found(exc):
            raise
        from azure.mgmt.network import models as n

        vnet = network.virtual_networks.begin_create_or_update(
            rg,
            VNET,
            n.VirtualNetwork(
                location=location,
                tags={TAG_MANAGED: "true"},
                properties=n.VirtualNetworkPropertiesFormat(
                    address_space=n.AddressSpace(address_prefixes=[VNET_CIDR]),
                    subnets=[
                        n.Subnet(
                            name="default",
                            properties=n.SubnetPropertiesFormat(address_prefix=SUBNET_CIDR),
                        )
                    ],
                ),
            ),
        ).result()
    return f"{vnet.id}/subnets/default"


def create(
    network: NetworkManagementClient,
    *,
    rg: str,
    location: str,
    name: str,
    subnet_id: str,
    allowed_cidr: str | None,
    tags: dict[str, str],
    zone: str | None,
) -> str:
    """Create NSG (+ public IP) + NIC; return the NIC id."""
    from azure.mgmt.network import models as n

    check_cidr(allowed_cidr)
    rules = []
    if allowed_cidr:
        rules.append(
            n.SecurityRule(
                name="ssh-from-runner",
                properties=n.SecurityRulePropertiesFormat(
                    priority=100,
                    direction="Inbound",
                    access="Allow",
                    protocol="Tcp",
                    source_address_prefix=allowed_cidr,
                    source_port_range="*",
                    destination_address_prefix="*",
                    destination_port_range="22",
                ),
            )
        )
    nsg = network.network_security_groups.begin_create_or_update(
        rg,
        f"{name}-nsg",
        n.NetworkSecurityGroup(
            location=location,
            tags=tags,
            properties=n.NetworkSecurityGroupPropertiesFormat(security_rules=rules),
        ),
    ).result()
    ip_props = n.NetworkInterfaceIPConfigurationPropertiesFormat(subnet=n.Subnet(id=subnet_id))
    if allowed_cidr:
        pip = network.public_ip_addresses.begin_create_or_update(
            rg,
            f"{name}-ip",
            n.PublicIPAddress(
                location=location,
                tags=tags,
                sku=n.PublicIPAddressSku(name="Standard"),
                zones=[zone] if zone else None,
                properties=n.PublicIPAddressPropertiesFormat(public_ip_allocation_method="Static"),
            ),
        ).result()
        ip_props.public_ip_address = n.PublicIPAddress(id=pip.id)
    nic = network.network_interfaces.begin_create_or_update(
        rg,
        f"{name}-nic",
        n.NetworkInterface(
            location=location,
            tags=tags,
            properties=n.NetworkInterfacePropertiesFormat(
                network_security_group=n.NetworkSecurityGroup(id=nsg.id),
                ip_configurations=[
                    n.NetworkInterfaceIPConfiguration(name="ipconfig1", properties=ip_props)
                ],
            ),
        ),
    ).result()
    return str(nic.id)


def address(network: NetworkManagementClient, rg: str, name: str) -> str | None:
    """The public IP if there is one, else the NIC's private IP."""
    from azure.core.exceptions import HttpResponseError

    try:
        pip = network.public_ip_addresses.get(rg, f"{name}-ip")
        if pip.ip_address:
            return str(pip.ip_address)
    except HttpResponseError as exc:
        if not is_not_found(exc):
            raise
    return private_address(network, rg, name)


def private_address(network: NetworkManagementClient, rg: str, name: str) -> str | None:
    """The NIC's private IP on the subnet (where the run's other hosts reach it)."""
    from azure.core.exceptions import HttpResponseError

    try:
        nic = network.network_interfaces.get(rg, f"{name}-nic")
    except HttpResponseError as exc:
        if is_not_found(exc):
            return None
        raise
    for cfg in nic.ip_configurations or []:
        if cfg.private_ip_address:
            return str(cfg.private_ip_address)
    return None


def delete(network: NetworkManagementClient, rg: str, name: str) -> None:
    """NIC, then public IP and NSG (the NIC holds both); missing ones are fine."""
    from azure.core.exceptions import HttpResponseError

    for ops, suffix in (
        (network.network_interfaces, "nic"),
        (network.public_ip_addresses, "ip"),
        (network.network_security_groups, "nsg"),
    ):
        try:
            ops.begin_delete(rg, f"{name}-{suffix}").result()
        except HttpResponseError as exc:
            if not is_not_found(exc):
                raise
