"""GCP clusters whose nodes are TPU VMs: one Cloud TPU node per rank, found by its labels.

The lifecycle is ``CloudProvider``'s (list by tag, create the missing ranks, wait for all to run);
this module supplies the Cloud TPU calls. A node's id is fixed per cluster and rank
(``bodies.tpu_node_id``), so a retried create meets ``ALREADY_EXISTS`` and takes the node as its own.
A spot TPU VM that Google takes back stays listed as ``PREEMPTED`` until deleted: it reads as gone
(``preempted`` says why), a create in its place deletes it first, and teardown deletes it too.
TPU VMs are not stopped by skyhop (``stop`` is refused, as on a provider without stop).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from skyhop.providers.base import (
    Capabilities,
    ClusterHandle,
    NodeHandle,
    NodeRuntime,
    ProvisionRequest,
)
from skyhop.providers.cloud import CLUSTER_TAG, RANK_TAG, CloudProvider, Instance, InstanceState
from skyhop.providers.cloud_ssh import ssh_node, ssh_runtime
from skyhop.providers.errors import CredentialsError, ProviderError
from skyhop.providers.gcp import bodies
from skyhop.providers.gcp.api import ComputeApi
from skyhop.providers.gcp.firewall import ensure_firewall
from skyhop.providers.keys import public_key

__all__ = ["TpuVms"]

Caller = Callable[[Callable[[ComputeApi], Any]], Awaitable[Any]]
"""The GCP provider's ``_call``: blocking work run in a thread with its session, errors classified."""

_STATES = {
    "CREATING": InstanceState.PENDING,
    "STARTING": InstanceState.PENDING,
    "RESTARTING": InstanceState.PENDING,
    "REIMAGING": InstanceState.PENDING,
    "REPAIRING": InstanceState.PENDING,
    "UNHIDING": InstanceState.PENDING,
    "READY": InstanceState.RUNNING,
    "STOPPING": InstanceState.STOPPING,
    "STOPPED": InstanceState.STOPPED,
}
_GONE = frozenset({"PREEMPTED", "TERMINATED", "DELETING", "HIDING", "HIDDEN"})
"""States of a node that will never run again: listed by the API, but no node of the cluster."""


def _zone(node: dict[str, Any]) -> str:
    """``projects/P/locations/ZONE/nodes/ID`` -> ``ZONE``."""
    return str(node["name"]).split("/")[3]


def _node_id(node: dict[str, Any]) -> str:
    return str(node["name"]).rpartition("/")[2]


def _instance(node: dict[str, Any]) -> Instance:
    endpoint = (node.get("networkEndpoints") or [{}])[0]
    return Instance(
        instance_id=_node_id(node),
        rank=int(node.get("labels", {}).get(RANK_TAG, "0")),
        zone=_zone(node),
        state=_STATES.get(str(node.get("state")), InstanceState.PENDING),
        private_ip=endpoint.get("ipAddress") or None,
        public_ip=endpoint.get("accessConfig", {}).get("externalIp") or None,
    )


class TpuVms(CloudProvider):
    """The TPU VMs of GCP clusters, through the GCP provider's session."""

    name = "gcp"
    capabilities = Capabilities(spot=True, multi_node=True, open_ports=True, labels=True)
    boot_timeout_s = 1800.0
    poll_interval_s = 5.0

    def __init__(self, call: Caller) -> None:
        self._call = call

    async def _nodes(self, cluster_name: str, region: str | None) -> list[dict[str, Any]]:
        """The cluster's nodes in ``region`` (None: anywhere), gone ones included."""
        nodes: list[dict[str, Any]] = await self._call(lambda api: api.tpu.nodes())
        return [
            node
            for node in nodes
            if node.get("labels", {}).get(CLUSTER_TAG) == cluster_name
            and (region is None or bodies.zone_region(_zone(node)) == region)
        ]

    async def list_instances(self, cluster_name: str, region: str | None) -> list[Instance]:
        return [_instance(n) for n in await self._nodes(cluster_name, region) if n.get("state") not in _GONE]

    async def create_instances(self, request: ProvisionRequest, ranks: list[int]) -> None:
        zone = request.offering.zone or ""
        key = public_key()
        accepted: list[dict[str, Any]] = []

        def create(api: ComputeApi, node_id: str, rank: int) -> dict[str, Any]:
            return api.tpu.create(zone, node_id, bodies.tpu_node_body(api.project, request, rank, key))

        def start(api: ComputeApi) -> None:
            ensure_firewall(api, request.cluster_name, request.ports)
            for rank in ranks:
                node_id = bodies.tpu_node_id(request, rank)
                try:
                    accepted.append(create(api, node_id, rank))
                except ProviderError as exc:
                    if exc.code != "ALREADY_EXISTS":
                        raise
                    if api.tpu.get(zone, node_id).get("state") in _GONE:  # a preempted one in the way
                        api.tpu.wait(api.tpu.delete(zone, node_id))
                        accepted.append(create(api, node_id, rank))
                    # else an earlier try created it: the labels will find it

        def wait(api: ComputeApi) -> None:
            for operation in accepted:
                api.tpu.wait(operation)

        try:
            await self._call(start)
        except ProviderError as exc:
            exc.leftover = bool(accepted)
            raise
        await self._call(wait)

    async def _delete(self, nodes: list[tuple[str | None, str]]) -> None:
        """Delete these (zone, node id) nodes and wait for every deletion; a missing one is fine."""

        def delete(api: ComputeApi) -> None:
            pending = []
            for zone, node_id in nodes:
                try:
                    pending.append(api.tpu.delete(zone or "", node_id))
                except ProviderError as exc:
                    if exc.code != "NOT_FOUND":
                        raise
            for operation in pending:
                api.tpu.wait(operation)

        await self._call(delete)

    async def terminate_instances(self, region: str | None, instances: list[Instance]) -> None:
        await self._delete([(i.zone, i.instance_id) for i in instances])

    async def terminate(self, handle: ClusterHandle) -> None:
        """Every node of the cluster, preempted ones included (they are billed for nothing, but listed)."""
        await self._delete([(_zone(n), _node_id(n)) for n in await self._nodes(handle.cluster_name, None)])

    async def remove_untracked(self, cluster_name: str) -> list[str]:
        """Every node of the cluster; none where the project has the Cloud TPU API off (no TPU VM can
        exist there, and a cluster of instances must still come down)."""
        try:
            nodes = await self._nodes(cluster_name, None)
        except CredentialsError as exc:
            if exc.code != "SERVICE_DISABLED":
                raise
            return []
        await self._delete([(_zone(n), _node_id(n)) for n in nodes])
        return [_node_id(n) for n in nodes]

    async def preempted(self, handle: ClusterHandle, gone: list[str]) -> set[str]:
        nodes = await self._nodes(handle.cluster_name, handle.offering.region)
        return {_node_id(n) for n in nodes if n.get("state") == "PREEMPTED"} & set(gone)

    def node(self, request: ProvisionRequest, instance: Instance) -> NodeHandle:
        return ssh_node(request.cluster_name, instance, bodies.SSH_USER)

    def runtime(self, node: NodeHandle) -> NodeRuntime:
        return ssh_runtime(node, bodies.SSH_USER)
