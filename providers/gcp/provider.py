"""``gcp``: Compute Engine through google-cloud-compute (REST).

Each node is one instance labelled with the cluster name and rank, named after them, and inserted
with a request id derived from the attempt: a retried call is deduplicated by GCP, a retried
activity finds the instance by its labels, and a racing insert meets ``alreadyExists``. One
firewall rule per cluster opens SSH and the task's ports to the instances carrying its network tag.
GCP calls zones one at a time (SkyPilot's ``zones_provision_loop``), so every offering has a zone.
An offering that is a TPU slice is a cluster of TPU VMs instead (``tpu_vms.py``), behind the same
firewall rule and SSH login.
"""

from __future__ import annotations

from typing import Any

from skyhop.providers.base import (
    Capabilities,
    ClusterHandle,
    DiskTier,
    NodeHandle,
    NodeRuntime,
    NodeStatus,
    ProvisionRequest,
)
from skyhop.providers.catalog.tpus import is_tpu
from skyhop.providers.cloud import CLUSTER_TAG, RANK_TAG, Instance, InstanceState
from skyhop.providers.cloud_sdk import SdkCloudProvider
from skyhop.providers.cloud_ssh import ssh_node, ssh_runtime
from skyhop.providers.errors import ProviderError
from skyhop.providers.gcp import bodies
from skyhop.providers.gcp.api import SETUP_HINT, ComputeApi
from skyhop.providers.gcp.errors import classify
from skyhop.providers.gcp.firewall import ensure_firewall, remove_firewall
from skyhop.providers.gcp.tpu_vms import TpuVms
from skyhop.providers.keys import public_key

__all__ = ["GCPProvider"]

_STATES = {
    "PROVISIONING": InstanceState.PENDING,
    "STAGING": InstanceState.PENDING,
    "REPAIRING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "STOPPING": InstanceState.STOPPING,
    "SUSPENDING": InstanceState.STOPPING,
    "TERMINATED": InstanceState.STOPPED,
    "SUSPENDED": InstanceState.STOPPED,
    "STOPPED": InstanceState.STOPPED,
}
"""GCP's ``TERMINATED`` is a stopped instance whose disk is kept; a deleted one is no longer listed."""


class GCPProvider(SdkCloudProvider[ComputeApi]):
    """Compute Engine instances in the catalog's zones."""

    name = "gcp"
    capabilities = Capabilities(
        spot=True,
        stop_start=True,
        multi_node=True,
        open_ports=True,
        custom_image=True,
        disk_size=True,
        disk_tiers=frozenset(DiskTier),
        labels=True,
    )
    poll_interval_s = 2.0
    setup_hint = SETUP_HINT

    def __init__(self) -> None:
        super().__init__(ComputeApi, classify)
        self.tpus = TpuVms(self._call)
        """The clusters whose offering is a TPU slice: their nodes are TPU VMs, not instances."""

    def whoami(self, session: ComputeApi) -> str:
        project = session.projects.get(project=session.project, **session.options)
        return f"project {project.name} as {session.identity}"

    async def list_instances(self, cluster_name: str, region: str | None) -> list[Instance]:
        def aggregated(api: ComputeApi) -> list[Instance]:
            pages = api.instances.aggregated_list(
                request={
                    "project": api.project,
                    "filter": f'labels.{CLUSTER_TAG} = "{cluster_name}"',
                },
                **api.options,
            )
            found = []
            for scope, scoped in pages:
                zone = scope.rpartition("/")[2]
                if region is not None and bodies.zone_region(zone) != region:
                    continue
                for item in scoped.instances:
                    interface = item.network_interfaces[0] if item.network_interfaces else None
                    nat = (
                        interface.access_configs[0].nat_i_p if interface and interface.access_configs else ""
                    )
                    found.append(
                        Instance(
                            instance_id=item.name,
                            rank=int(item.labels.get(RANK_TAG, "0")),
                            zone=zone,
                            state=_STATES.get(item.status, InstanceState.PENDING),
                            private_ip=interface.network_i_p if interface else None,
                            public_ip=nat or None,
                        )
                    )
            return found

        return await self._call(aggregated)

    async def preempted(self, handle: ClusterHandle, gone: list[str]) -> set[str]:
        zone = handle.offering.zone
        if zone is None:
            return set()
        return set(gone) & await self._call(lambda api: api.preempted_instances(zone))

    async def create_instances(self, request: ProvisionRequest, ranks: list[int]) -> None:
        zone = request.offering.zone or ""
        key = public_key()
        inserted: list[Any] = []

        def insert(api: ComputeApi) -> None:
            from google.api_core.exceptions import Conflict

            ensure_firewall(api, request.cluster_name, request.ports)
            for rank in ranks:
                body = bodies.instance_body(api.project, request, rank, key)
                try:
                    operation = api.instances.insert(
                        request={
                            "project": api.project,
                            "zone": zone,
                            "instance_resource": body,
                            "request_id": bodies.request_id(request, rank),
                        },
                        **api.options,
                    )
                except Conflict:
                    continue  # an earlier try created it: the labels will find it
                inserted.append(operation)

        def wait(api: ComputeApi) -> None:
            failures: list[ProviderError] = []
            for operation in inserted:
                try:
                    api.wait(operation, zone)
                except ProviderError as exc:
                    failures.append(exc)
            if failures:
                failures[0].leftover = len(failures) < len(inserted)
                raise failures[0]

        try:
            await self._call(insert)
        except ProviderError as exc:
            exc.leftover = bool(inserted)
            raise
        await self._call(wait)

    async def open_ports(self, handle: ClusterHandle, ports: list[str]) -> None:
        await self._call(lambda api: ensure_firewall(api, handle.cluster_name, ports))

    async def _each(self, verb: str, instances: list[Instance], missing_ok: bool) -> None:
        """Call ``instances.<verb>`` on every instance, then wait for all the operations."""

        def act(api: ComputeApi) -> None:
            from google.api_core.exceptions import NotFound

            pending = []
            for instance in instances:
                try:
                    pending.append(
                        (
                            getattr(api.instances, verb)(
                                project=api.project,
                                zone=instance.zone,
                                instance=instance.instance_id,
                                **api.options,
                            ),
                            instance.zone,
                        )
                    )
                except NotFound:
                    if not missing_ok:
                        raise
            for operation, zone in pending:
                api.wait(operation, zone)

        await self._call(act)

    async def terminate_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._each("delete", instances, missing_ok=True)

    async def terminate(self, handle: ClusterHandle) -> None:
        """Delete the nodes, then the cluster's firewall rule once no node of it is left anywhere."""
        if is_tpu(handle.offering.instance_type):
            await self.tpus.terminate(handle)
            left = await self.tpus.list_instances(handle.cluster_name, None)
        else:
            await super().terminate(handle)
            left = await self.list_instances(handle.cluster_name, None)
        if not left:
            await self._call(lambda api: remove_firewall(api, handle.cluster_name))

    async def launch(self, request: ProvisionRequest) -> ClusterHandle:
        if is_tpu(request.offering.instance_type):
            return await self.tpus.launch(request)
        return await super().launch(request)

    async def start(self, handle: ClusterHandle, request: ProvisionRequest | None = None) -> ClusterHandle:
        if is_tpu(handle.offering.instance_type):
            return await self.tpus.start(handle, request)
        return await super().start(handle, request)

    async def stop(self, handle: ClusterHandle) -> None:
        if is_tpu(handle.offering.instance_type):
            return await self.tpus.stop(handle)
        return await super().stop(handle)

    async def node_statuses(self, handle: ClusterHandle) -> list[NodeStatus]:
        if is_tpu(handle.offering.instance_type):
            return await self.tpus.node_statuses(handle)
        return await super().node_statuses(handle)

    async def remove_untracked(self, cluster_name: str) -> list[str]:
        """The cluster's instances and TPU VMs, wherever they are."""
        return await super().remove_untracked(cluster_name) + await self.tpus.remove_untracked(cluster_name)

    async def stop_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._each("stop", instances, missing_ok=False)

    async def start_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._each("start", instances, missing_ok=False)

    def node(self, request: ProvisionRequest, instance: Instance) -> NodeHandle:
        return ssh_node(request.cluster_name, instance, bodies.SSH_USER)

    def runtime(self, node: NodeHandle) -> NodeRuntime:
        return ssh_runtime(node, bodies.SSH_USER)
