"""Activities that change infrastructure or run things on nodes (the long task queue)."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import FileMountsInput, ProvisionInput, RunJobInput, SetupInput, SyncWorkdirInput
from activities.node_jobs import WORKDIR, job_env, run_on_nodes
from providers.base import ClusterHandle
from providers.registry import get_provider
from providers.runtime.jobs import JobOutcome, JobSpec

__all__ = ["provision", "run_job", "run_setup", "sync_file_mounts", "sync_workdir", "terminate"]


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


@activity.defn
async def sync_workdir(request: SyncWorkdirInput) -> None:
    """Copy the task's workdir to every node."""
    await _sync_workdir(request.handle, request.workdir)


async def _sync_workdir(handle: ClusterHandle, workdir: str) -> None:
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


@activity.defn
async def run_setup(request: SetupInput) -> None:
    """Run the task's setup on every node in parallel; a failure is the user's to fix, not retried."""
    assert request.task.setup is not None
    specs = [
        JobSpec(
            key=request.key,
            script=request.task.setup,
            env=job_env(request.handle, request.task, node.rank, request.key),
            cwd=WORKDIR,
        )
        for node in request.handle.nodes
    ]
    outcome = await run_on_nodes(request.handle, specs)
    if outcome.status != "SUCCEEDED":
        raise ApplicationError(
            f"setup failed on node {outcome.failed_rank} with exit code {outcome.exit_code}"
            + (f": {outcome.error}" if outcome.error else ""),
            outcome.model_dump(),
            type="SetupFailed",
            non_retryable=True,
        )


@activity.defn
async def run_job(request: RunJobInput) -> JobOutcome:
    """Run a queued job on its nodes and return how it ended (it runs once, even if retried)."""
    if request.sync_workdir and request.task.workdir:
        await _sync_workdir(request.handle, request.task.workdir)
    assert request.task.run is not None
    specs = [
        JobSpec(
            key=request.job.key,
            script=request.task.run,
            env=job_env(request.handle, request.task, rank, request.job.task_id),
            cwd=WORKDIR,
        )
        for rank in range(request.task.num_nodes)
    ]
    return await run_on_nodes(request.handle, specs)
