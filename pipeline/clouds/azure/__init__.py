"""Azure (azure-mgmt-compute, azure-mgmt-network, azure-identity): Compute Gallery image
versions, validation VMs with their own NIC / NSG / public IP.

``clients`` builds the management clients (endpoint override, DefaultAzureCredential,
retry policy); ``errors`` maps ARM error codes; ``network`` owns the VM's NIC, NSG and
public IP; ``provider`` is the Provider; ``spec`` what a stack's ``clouds.azure`` means
(``imagectl.clouds.spec``).
"""
