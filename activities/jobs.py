"""Activities that run the task's setup and jobs on nodes (long task queue)."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import RunJobInput, SetupInput
from activities.node_jobs import WORKDIR, job_env, run_on_nodes
from activities.sync import sync_workdir_to
from providers.runtime.jobs import JobOutcome, JobSpec

__all__ = ["run_job", "run_setup"]


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
        await sync_workdir_to(request.handle, request.task.workdir)
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
