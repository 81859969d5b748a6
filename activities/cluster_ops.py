"""Activities of a cluster's lifecycle after launch: stop, start, cancel jobs, ask the provider.

Each is idempotent: stopping a stopped node, starting a started one, cancelling an ended job or
probing twice changes nothing, so Temporal may retry any of them.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from temporalio import activity

from skyhop.contract.clusters import JobRecord
from skyhop.providers.base import (
    CannotStopError,
    ClusterHandle,
    NodeStatus,
    ProvisionRequest,
    StatusUnknownError,
)
from skyhop.providers.errors import ProviderError
from skyhop.providers.registry import get_provider, provider_names

__all__ = [
    "CancelJobsInput",
    "ProbeResult",
    "StartClusterInput",
    "StopResult",
    "TaggedRemoval",
    "cancel_jobs",
    "probe_cluster",
    "remove_tagged_instances",
    "start_cluster",
    "stop_cluster",
]


class StopResult(BaseModel):
    kept_nodes: bool
    """False when the provider cannot stop, so the nodes were removed (start re-creates them)."""


class StartClusterInput(BaseModel):
    handle: ClusterHandle
    recreate: bool = False
    """Provision the same offering (same region and zone) again instead of starting stopped nodes."""
    request: ProvisionRequest | None = None
    """How the nodes were provisioned; None on clusters from before it was kept (the handle's
    offering and market are then all that is known)."""

    def node_request(self, attempt_id: str) -> ProvisionRequest:
        """The request that brings back the same nodes, as a new attempt (a fresh idempotency token)."""
        kept = self.request or self.handle.request()
        return kept.model_copy(update={"attempt_id": attempt_id})


class CancelJobsInput(BaseModel):
    handle: ClusterHandle
    jobs: list[JobRecord]


class ProbeResult(BaseModel):
    statuses: list[NodeStatus] | None
    """Each node's real state in rank order, or None when the provider cannot tell."""


@activity.defn
async def stop_cluster(handle: ClusterHandle) -> StopResult:
    """Stop every node, keeping disks; where the provider cannot stop, remove the nodes instead."""
    activity.heartbeat()
    provider = get_provider(handle.offering.provider)
    try:
        await provider.stop(handle)
        return StopResult(kept_nodes=True)
    except CannotStopError:
        await provider.terminate(handle)
        return StopResult(kept_nodes=False)


@activity.defn
async def start_cluster(request: StartClusterInput) -> ClusterHandle:
    """Start the stopped nodes, or re-create them when they were removed: the same nodes either way.

    Nodes are (re-)created from the request the cluster kept from its launch, so a spot cluster
    with its own image and disk comes back as one, not as the provider's on-demand default.
    """
    activity.heartbeat()
    info = activity.info()
    # The same for every retry of this activity, new for each start: a retry finds what it created.
    nodes = request.node_request(f"{info.workflow_id}/{info.workflow_run_id}/start-{info.activity_id}")
    provider = get_provider(request.handle.offering.provider)
    if not request.recreate:
        return await provider.start(request.handle, nodes)
    return await provider.launch(nodes)


@activity.defn
async def cancel_jobs(request: CancelJobsInput) -> None:
    """Stop the jobs' processes on every node they were placed on (a no-op for ended jobs)."""
    provider = get_provider(request.handle.offering.provider)
    kills = []
    for job in request.jobs:
        for node in job.handle_in(request.handle).nodes:
            kills.append(provider.runtime(node).cancel_job(job.key))
    # One unreachable node must not keep the others' processes alive.
    results = await asyncio.gather(*kills, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]


@activity.defn
async def probe_cluster(handle: ClusterHandle) -> ProbeResult:
    """The provider's view of each node: the truth that ``status --refresh`` reconciles with."""
    try:
        return ProbeResult(statuses=await get_provider(handle.offering.provider).node_statuses(handle))
    except StatusUnknownError:
        return ProbeResult(statuses=None)


class TaggedRemoval(BaseModel):
    removed: list[str] = []
    """``provider/instance`` of each node removed."""
    unreachable: list[str] = []
    """``provider: reason`` of each provider that could not be asked (no credentials here, say)."""


async def remove_tagged_instances(cluster_name: str) -> TaggedRemoval:
    """Remove every node an enabled provider holds for ``cluster_name``, found by its tags.

    For a cluster whose workflow is stuck, so its record (and node handles) cannot be read: the
    tags every instance carries (cluster name, node rank) are the other way to find them.
    """
    result = TaggedRemoval()
    for name in provider_names():
        try:
            result.removed += [f"{name}/{i}" for i in await get_provider(name).remove_untracked(cluster_name)]
        except ProviderError as exc:
            result.unreachable.append(f"{name}: {exc}")
    return result
