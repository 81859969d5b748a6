"""Activities that copy the user's files to nodes (long task queue)."""

from __future__ import annotations

import asyncio

from temporalio import activity

from activities.models import FileMountsInput, SyncWorkdirInput
from activities.node_jobs import WORKDIR
from providers.base import ClusterHandle
from providers.registry import get_provider

__all__ = ["sync_file_mounts", "sync_workdir", "sync_workdir_to"]


@activity.defn
async def sync_workdir(request: SyncWorkdirInput) -> None:
    """Copy the task's workdir to every node."""
    await sync_workdir_to(request.handle, request.workdir)


async def sync_workdir_to(handle: ClusterHandle, workdir: str) -> None:
    provider = get_provider(handle.offering.provider)
    activity.heartbeat()
    await asyncio.gather(*(provider.runtime(node).sync_dir(workdir, WORKDIR) for node in handle.nodes))


@activity.defn
async def sync_file_mounts(request: FileMountsInput) -> None:
    """Copy each local file mount to its remote path on every node."""
    provider = get_provider(request.handle.offering.provider)
    for remote, local in request.file_mounts.items():
        activity.heartbeat(remote)
        await asyncio.gather(*(provider.runtime(n).put_path(local, remote) for n in request.handle.nodes))
