"""``azure``: virtual machines through azure-mgmt-compute, with azure-mgmt-network and -resource.

A cluster's nodes in a region live in one resource group with its network and security group;
each node is a VM named after cluster and rank and tagged with both. A VM PUT is idempotent by
name, so neither a retried call nor a retried activity creates a second one. Azure offerings
are regional (SkyPilot tries all zones of a region in one request), so every failure other than
an authentication one blocks at least the region.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

from skyhop.providers.azure import bodies
from skyhop.providers.azure.api import SETUP_HINT, ArmApi
from skyhop.providers.azure.errors import classify
from skyhop.providers.base import (
    Capabilities,
    ClusterHandle,
    DiskTier,
    NodeHandle,
    NodeRuntime,
    ProvisionRequest,
)
from skyhop.providers.cloud import CLUSTER_TAG, RANK_TAG, Instance, InstanceState
from skyhop.providers.cloud_sdk import SdkCloudProvider
from skyhop.providers.cloud_ssh import ssh_node, ssh_runtime
from skyhop.providers.errors import InvalidRequestError, ProviderError
from skyhop.providers.keys import public_key

__all__ = ["AzureProvider"]

_POWER = {
    "PowerState/starting": InstanceState.PENDING,
    "PowerState/running": InstanceState.RUNNING,
    "PowerState/stopping": InstanceState.STOPPING,
    "PowerState/deallocating": InstanceState.STOPPING,
    "PowerState/stopped": InstanceState.STOPPED,
    "PowerState/deallocated": InstanceState.STOPPED,
}
_GONE = ("Failed", "Deleting")
"""Provisioning states of a VM that is no node: a failed create is re-PUT, a deleted one recreated."""


_ACTIVITY_LOG_DAYS = timedelta(days=89)
"""How far back evictions are looked for: the Activity Log keeps 90 days."""


def _region(region: str | None) -> str:
    if not region:
        raise InvalidRequestError("an azure offering must name its region", "NoRegion", leftover=False)
    return region


class AzureProvider(SdkCloudProvider[ArmApi]):
    """Azure VMs in the catalog's regions."""

    name = "azure"
    capabilities = Capabilities(
        spot=True,
        stop_start=True,
        multi_node=True,
        open_ports=True,
        custom_image=True,
        disk_size=True,
        disk_tiers=frozenset(DiskTier) - {DiskTier.ULTRA},
        labels=True,
    )
    poll_interval_s = 5.0
    setup_hint = SETUP_HINT

    def __init__(self) -> None:
        super().__init__(ArmApi, classify)

    def whoami(self, session: ArmApi) -> str:
        return session.check()

    async def list_instances(self, cluster_name: str, region: str | None) -> list[Instance]:
        group = bodies.group_name(cluster_name, _region(region))

        def describe(api: ArmApi) -> list[Instance]:
            from azure.core.exceptions import ResourceNotFoundError

            try:
                vms = [
                    vm
                    for vm in api.compute.virtual_machines.list(group)
                    if (vm.tags or {}).get(CLUSTER_TAG) == cluster_name
                    and vm["properties"].get("provisioningState") not in _GONE
                ]
            except ResourceNotFoundError:
                return []  # no resource group: nothing was ever created here, or it was removed
            addresses = self._addresses(api, group)
            found = []
            for vm in vms:
                name: str = vm["name"]
                view = api.compute.virtual_machines.instance_view(group, name)
                codes = [status["code"] for status in view.get("statuses", [])]
                power = next((_POWER[c] for c in codes if c in _POWER), InstanceState.PENDING)
                private, public = addresses.get(name.lower(), (None, None))
                found.append(
                    Instance(
                        instance_id=vm["id"],
                        rank=int((vm.tags or {}).get(RANK_TAG, "0")),
                        zone=None,
                        state=power,
                        private_ip=private,
                        public_ip=public,
                    )
                )
            return found

        return await self._call(describe)

    async def preempted(self, handle: ClusterHandle, gone: list[str]) -> set[str]:
        group = bodies.group_name(handle.cluster_name, _region(handle.offering.region))
        since = datetime.now(UTC) - _ACTIVITY_LOG_DAYS
        evicted = await self._call(lambda api: api.evicted(group, since))
        return {instance_id for instance_id in gone if instance_id.lower() in evicted}

    @staticmethod
    def _addresses(api: ArmApi, group: str) -> dict[str, tuple[str | None, str | None]]:
        """VM name (lowercase) -> (private IP, public IP), from the group's NICs and public IPs."""
        public = {
            ip["id"].lower(): ip["properties"].get("ipAddress")
            for ip in api.network.public_ip_addresses.list(group)
        }
        found: dict[str, tuple[str | None, str | None]] = {}
        for nic in api.network.network_interfaces.list(group):
            properties = nic["properties"]
            owner = properties.get("virtualMachine", {}).get("id", "")
            configs = properties.get("ipConfigurations", [])
            if not owner or not configs:
                continue
            ip = configs[0]["properties"]
            address_id = ip.get("publicIPAddress", {}).get("id", "").lower()
            found[owner.rpartition("/")[2].lower()] = (ip.get("privateIPAddress"), public.get(address_id))
        return found

    async def create_instances(self, request: ProvisionRequest, ranks: list[int]) -> None:
        region = _region(request.offering.region)
        group = bodies.group_name(request.cluster_name, region)
        key = public_key()
        started: list[Any] = []

        def begin(api: ArmApi) -> None:
            from azure.mgmt.compute.models import VirtualMachine
            from azure.mgmt.resource.resources.models import ResourceGroup

            api.resources.resource_groups.create_or_update(
                group, ResourceGroup({"location": region, "tags": {CLUSTER_TAG: request.cluster_name}})
            )
            self._ensure_network(api, group, region, request.ports)
            for rank in ranks:
                body = bodies.vm_body(api.subscription, request, rank, key)
                name = bodies.vm_name(request.cluster_name, rank)
                started.append(
                    api.compute.virtual_machines.begin_create_or_update(group, name, VirtualMachine(body))
                )

        def finish(api: ArmApi) -> None:
            failures: list[ProviderError] = []
            for poller in started:
                try:
                    poller.result()
                except Exception as exc:
                    classified = classify(exc)
                    if classified is None:
                        raise
                    failures.append(classified)
            if failures:
                failures[0].leftover = True  # a failed VM and its NIC may remain until the group goes
                raise failures[0]

        try:
            await self._call(begin)
        except ProviderError as exc:
            exc.leftover = bool(started)
            raise
        await self._call(finish)

    def _ensure_network(self, api: ArmApi, group: str, region: str, ports: list[str]) -> None:
        """The group's network exists, and its security group allows SSH and ``ports`` (widened as needed)."""
        from azure.core.exceptions import ResourceNotFoundError
        from azure.mgmt.network.models import NetworkSecurityGroup, VirtualNetwork

        try:
            api.network.virtual_networks.get(group, bodies.VNET)
        except ResourceNotFoundError:
            api.network.virtual_networks.begin_create_or_update(
                group, bodies.VNET, VirtualNetwork(bodies.vnet_body(region))
            ).result()
        try:
            rules = api.network.network_security_groups.get(group, bodies.NSG)["properties"].get(
                "securityRules", []
            )
            have = [rule["properties"]["destinationPortRange"] for rule in rules]
        except ResourceNotFoundError:
            have = []
        wanted = have + [p for p in ["22", *ports] if p not in have]
        if wanted != have:
            api.network.network_security_groups.begin_create_or_update(
                group, bodies.NSG, NetworkSecurityGroup(bodies.nsg_body(region, wanted))
            ).result()

    async def open_ports(self, handle: ClusterHandle, ports: list[str]) -> None:
        region = _region(handle.offering.region)
        group = bodies.group_name(handle.cluster_name, region)
        await self._call(lambda api: self._ensure_network(api, group, region, ports))

    async def _each(self, instances: list[Instance], verb: str) -> None:
        """``virtual_machines.begin_<verb>`` on every instance (by its resource id), then wait for all."""

        def act(api: ArmApi) -> None:
            from azure.core.exceptions import ResourceNotFoundError

            pollers = []
            for instance in instances:
                group, name = _group_and_name(instance.instance_id)
                try:
                    pollers.append(getattr(api.compute.virtual_machines, f"begin_{verb}")(group, name))
                except ResourceNotFoundError:
                    if verb != "delete":
                        raise
            for poller in pollers:
                poller.result()

        await self._call(act)

    async def terminate_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._each(instances, "delete")

    async def terminate(self, handle: ClusterHandle) -> None:
        """Delete the nodes, then the cluster's resource group in the region with all that is left in it."""
        await super().terminate(handle)
        group = bodies.group_name(handle.cluster_name, _region(handle.offering.region))

        def remove_group(api: ArmApi) -> None:
            from azure.core.exceptions import ResourceNotFoundError

            with contextlib.suppress(ResourceNotFoundError):
                api.resources.resource_groups.begin_delete(group).result()

        await self._call(remove_group)

    async def stop_instances(self, region: str | None, instances: list[Instance]) -> None:
        """Deallocate, so a stopped node is not billed for its cores (its disk stays)."""
        await self._each(instances, "deallocate")

    async def start_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._each(instances, "start")

    def node(self, request: ProvisionRequest, instance: Instance) -> NodeHandle:
        return ssh_node(request.cluster_name, instance, bodies.SSH_USER)

    def runtime(self, node: NodeHandle) -> NodeRuntime:
        return ssh_runtime(node, bodies.SSH_USER)


def _group_and_name(resource_id: str) -> tuple[str, str]:
    """(resource group, VM name) of a VM's resource id."""
    parts = resource_id.split("/")
    return parts[parts.index("resourceGroups") + 1], parts[-1]
