"""Activities that run the task's setup and jobs on nodes (long task queue)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyhop.activities.job_index import report_row
from skyhop.activities.models import ClusterLeave, ManagedRunStart, RunJobInput, SetupInput, WaitJobInput
from skyhop.activities.node_jobs import (
    WORKDIR,
    install_programs,
    job_container,
    job_env,
    run_on_nodes,
    start_on_nodes,
    stop_if_cancelled,
    wait_on_nodes,
)
from skyhop.activities.provisioning import terminate
from skyhop.activities.sync import sync_task_workdir
from skyhop.activities.watch_hub import follow
from skyhop.contract import ErrorType
from skyhop.providers.runtime.jobs import ContainerStage, JobOutcome, JobSpec, NodeJobStatus
from skyhop.storage.logs import setup_stream
from skyhop.storage.node_commands import tool_env, with_flush

__all__ = ["leave_cluster", "run_setup", "start_job", "start_managed_run", "wait_job"]

T = TypeVar("T")

_BEAT_S = 2.0


@activity.defn
async def run_setup(request: SetupInput) -> None:
    """Run the task's setup on every node in parallel; a failure is the user's to fix, not retried.

    A task with a container sets it up even without a setup script: the image is pulled then, and a
    node that cannot run containers fails here, before any job is queued.
    """
    assert request.task.needs_setup
    container = job_container(request.handle, request.task, ContainerStage.SETUP)
    specs = [
        JobSpec(
            key=request.key,
            script=request.task.setup or "true",
            env=job_env(request.handle, request.task, node.rank, request.key),
            cwd=WORKDIR,
            container=container,
        )
        for node in request.handle.nodes
    ]
    outcome = await run_on_nodes(request.handle, specs, logs=setup_stream(request.key))
    if outcome.status != NodeJobStatus.SUCCEEDED:
        raise ApplicationError(
            f"setup failed on node {outcome.failed_rank} with exit code {outcome.exit_code}"
            + (f": {outcome.error}" if outcome.error else ""),
            outcome.model_dump(),
            type=ErrorType.SETUP_FAILED,
            non_retryable=True,
        )


@activity.defn
async def start_job(request: RunJobInput) -> None:
    """Start a scheduled job on its nodes (after syncing its workdir, for ``exec``); never twice."""
    handle = request.job.handle_in(request.handle)
    if request.sync_workdir:
        await _heartbeating(sync_task_workdir(handle, request.task))
    assert request.task.run is not None
    script = request.task.run
    if request.flush_cached_mounts:
        script = with_flush(script)
        await _heartbeating(install_programs(handle))
    specs = []
    for rank in range(request.task.num_nodes):
        env = job_env(handle, request.task, rank, request.job.task_id)
        if request.flush_cached_mounts:
            env.update(tool_env(handle.nodes[rank]))
        if rank < len(request.job.placement) and handle.offering.accelerators:
            # Only the GPUs the scheduler gave this rank; other jobs hold the rest.
            gpu_ids = request.job.placement[rank].gpu_ids
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(gpu) for gpu in gpu_ids)
            for prefix in ("SKYHOP_", "SKYPILOT_"):
                env[f"{prefix}NUM_GPUS_PER_NODE"] = str(len(gpu_ids))
        specs.append(
            JobSpec(
                key=request.job.key,
                script=script,
                env=env,
                cwd=WORKDIR,
                container=job_container(handle, request.task, ContainerStage.RUN),
            )
        )
    try:
        await _heartbeating(start_on_nodes(handle, specs))
    except asyncio.CancelledError:
        # Cancelled by the workflow (the job was cancelled while it started): whatever did start
        # must not run on unseen, holding resources the scheduler thinks are free.
        await stop_if_cancelled(handle, request.job.key, len(handle.nodes))
        raise


@activity.defn
async def start_managed_run(request: ManagedRunStart) -> None:
    """Start a managed job's run, then have its watch hub follow it and send the job's row that says
    it runs: one activity, and one workflow task to hear it, where a launch or relaunch had three.

    Each step may be done twice and counts once: a retried start starts nothing twice, the hub keeps
    a run it follows already, the shard keeps a row's ``seq`` once. The job waits for the run's end
    from before this began, so an end signalled at once is not missed.
    """
    await start_job(request.start)
    await follow(request.follow)
    if request.report is not None:
        await report_row(activity.client(), request.report)


@activity.defn
async def leave_cluster(request: ClusterLeave) -> None:
    """Remove the cluster a managed job leaves to recover, and send the job's row meanwhile: one
    activity, and one workflow task to hear it, where the relaunch had two. Both are idempotent:
    nodes already gone are not looked for again, the shard keeps a row's ``seq`` once."""
    await asyncio.gather(terminate(request.handle), report_row(activity.client(), request.report))


@activity.defn
async def wait_job(request: WaitJobInput) -> JobOutcome:
    """Wait for a started job to end on all its nodes; a retry (or a new worker) re-attaches to it.

    Only cluster runs from before job watchers call it (``workflows.job_watch.JOB_EVENTS_PATCH``):
    they keep calling it for their running jobs until they continue as new.
    """
    handle = request.job.handle_in(request.handle)
    return await wait_on_nodes(handle, request.job.key, request.job.num_nodes)


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating, so a long sync is not mistaken for a dead worker."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait([task], timeout=_BEAT_S)
            if done:
                return task.result()
            activity.heartbeat()
    except asyncio.CancelledError:
        task.cancel()
        raise
