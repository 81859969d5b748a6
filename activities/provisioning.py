"""Activities that create and remove infrastructure (long task queue)."""

from __future__ import annotations

from temporalio import activity

from activities.models import ProvisionInput
from providers.base import ClusterHandle
from providers.registry import get_provider

__all__ = ["provision", "terminate"]


@activity.defn
async def provision(request: ProvisionInput) -> ClusterHandle:
    """Bring up the cluster's nodes; idempotent, so a retry never creates a second set."""
    activity.heartbeat()
    provider = get_provider(request.offering.provider)
    handle = await provider.provision(request.cluster_name, request.offering, request.num_nodes)
    return handle.model_copy(update={"use_spot": request.use_spot})


@activity.defn
async def terminate(handle: ClusterHandle) -> None:
    """Remove every node of the cluster and what runs on it."""
    activity.heartbeat()
    await get_provider(handle.offering.provider).terminate(handle)
