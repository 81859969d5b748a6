"""The Resource Manager bodies skyhop sends: a cluster's VMs, network security group and network.

Everything of one cluster in one region lives in its own resource group, so removing the group
removes every disk, NIC and address with it. A VM declares its NIC and public IP inline
(``networkInterfaceConfigurations``, with ``deleteOption: Delete``): one PUT per node, and deleting
the VM deletes them. Spot VMs are deleted on eviction and pay at most the on-demand price.
"""

from __future__ import annotations

from typing import Any

from skyhop.providers.base import DiskTier, NetworkTier, ProvisionRequest
from skyhop.providers.cloud import CLUSTER_TAG, RANK_TAG
from skyhop.providers.errors import InvalidRequestError
from skyhop.providers.naming import fit_name

__all__ = [
    "NSG",
    "SSH_USER",
    "VNET",
    "group_name",
    "image_reference",
    "nsg_body",
    "vm_body",
    "vm_name",
    "vnet_body",
]

SSH_USER = "skyhop"
NSG = "skyhop-nsg"
VNET = "skyhop-vnet"
_SUBNET = "default"
_UBUNTU = {
    "publisher": "Canonical",
    "offer": "0001-com-ubuntu-server-jammy",
    "sku": "22_04-lts-gen2",
    "version": "latest",
}
_FIRST_RULE_PRIORITY = 1000


def group_name(cluster_name: str, region: str) -> str:
    """The resource group holding the cluster's resources in ``region`` (at most 90 characters)."""
    return fit_name(f"skyhop-{cluster_name}", 90, f"-{region}")


def vm_name(cluster_name: str, rank: int) -> str:
    """The VM of node ``rank`` (a Linux VM name has at most 64 characters)."""
    return fit_name(cluster_name, 64, f"-{rank}")


def image_reference(image_id: str | None) -> dict[str, str]:
    """Ubuntu 22.04 by default; else a ``publisher:offer:sku:version`` URN or an image resource id."""
    if image_id is None:
        return dict(_UBUNTU)
    if image_id.startswith("/"):
        return {"id": image_id}
    parts = image_id.split(":")
    if len(parts) != 4 or not all(parts):
        raise InvalidRequestError(
            f"image_id {image_id!r} is not an Azure image: use publisher:offer:sku:version or a resource id",
            "InvalidImage",
            leftover=False,
        )
    return dict(zip(("publisher", "offer", "sku", "version"), parts, strict=True))


def _network_id(subscription: str, group: str, kind: str, name: str) -> str:
    return f"/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Network/{kind}/{name}"


_TIER_STORAGE = {
    DiskTier.LOW: "Standard_LRS",
    DiskTier.MEDIUM: "StandardSSD_LRS",
    DiskTier.HIGH: "Premium_LRS",
    DiskTier.BEST: "Premium_LRS",
}
"""The OS disk's storage per disk tier; Azure has no ``ultra`` OS disk (SkyPilot refuses it too)."""


def storage_account_type(tier: DiskTier | None) -> str:
    """The OS disk's storage account type: by tier, default ``StandardSSD_LRS``."""
    return _TIER_STORAGE[tier or DiskTier.MEDIUM]


def vm_body(subscription: str, request: ProvisionRequest, rank: int, public_key: str) -> dict[str, Any]:
    """The ``virtualMachines`` PUT body of node ``rank``."""
    offering = request.offering
    region = offering.region or ""
    group = group_name(request.cluster_name, region)
    name = vm_name(request.cluster_name, rank)
    os_disk: dict[str, Any] = {
        "createOption": "FromImage",
        "deleteOption": "Delete",
        "managedDisk": {"storageAccountType": storage_account_type(request.disk_tier)},
    }
    if request.disk_size:
        os_disk["diskSizeGB"] = request.disk_size
    nic = {
        "name": f"{name}-nic",
        "properties": {
            "primary": True,
            "deleteOption": "Delete",
            **({"enableAcceleratedNetworking": True} if request.network_tier == NetworkTier.BEST else {}),
            "networkSecurityGroup": {"id": _network_id(subscription, group, "networkSecurityGroups", NSG)},
            "ipConfigurations": [
                {
                    "name": "ipconfig1",
                    "properties": {
                        "primary": True,
                        "subnet": {
                            "id": _network_id(subscription, group, "virtualNetworks", VNET)
                            + f"/subnets/{_SUBNET}"
                        },
                        "publicIPAddressConfiguration": {
                            "name": f"{name}-ip",
                            "sku": {"name": "Standard"},
                            "properties": {"publicIPAllocationMethod": "Static", "deleteOption": "Delete"},
                        },
                    },
                }
            ],
        },
    }
    properties: dict[str, Any] = {
        "hardwareProfile": {"vmSize": offering.instance_type},
        "storageProfile": {"imageReference": image_reference(request.image_id), "osDisk": os_disk},
        "osProfile": {
            "computerName": name,
            "adminUsername": SSH_USER,
            "linuxConfiguration": {
                "disablePasswordAuthentication": True,
                "ssh": {
                    "publicKeys": [{"path": f"/home/{SSH_USER}/.ssh/authorized_keys", "keyData": public_key}]
                },
            },
        },
        "networkProfile": {"networkApiVersion": "2020-11-01", "networkInterfaceConfigurations": [nic]},
    }
    if request.use_spot:
        properties.update(priority="Spot", evictionPolicy="Delete", billingProfile={"maxPrice": -1})
    return {
        "location": region,
        "tags": {**request.labels, CLUSTER_TAG: request.cluster_name, RANK_TAG: str(rank)},
        "properties": properties,
    }


def nsg_body(region: str, ports: list[str]) -> dict[str, Any]:
    """A network security group allowing inbound TCP from anywhere to each of ``ports``."""
    rules = [
        {
            "name": f"skyhop-tcp-{port}",
            "properties": {
                "protocol": "Tcp",
                "sourcePortRange": "*",
                "destinationPortRange": port,
                "sourceAddressPrefix": "*",
                "destinationAddressPrefix": "*",
                "access": "Allow",
                "priority": _FIRST_RULE_PRIORITY + i,
                "direction": "Inbound",
            },
        }
        for i, port in enumerate(ports)
    ]
    return {"location": region, "properties": {"securityRules": rules}}


def vnet_body(region: str) -> dict[str, Any]:
    """The cluster's private network, one subnet."""
    return {
        "location": region,
        "properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": _SUBNET, "properties": {"addressPrefix": "10.0.0.0/24"}}],
        },
    }
