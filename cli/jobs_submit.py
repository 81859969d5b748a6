"""``skyhop jobs launch``: read the job, take an id, start its ``ManagedJobWorkflow``, follow it.

Everything the user can get wrong is checked before anything is started (``load_job``): the
YAML, the overrides, where each task may run, and the request's size. Only then is an id taken
and the workflow started, with the search attributes and memo ``jobs queue`` lists it by.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Literal

from skyhop.cli.output import EXIT_DETACHED, fail, info

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.contract.job_index import ManagedJobSummary
    from skyhop.contract.managed_jobs import ManagedJobRequest
    from skyhop.spec import Dag, TaskOverrides

__all__ = ["STARTS_IN_FLIGHT", "load_job", "ranked", "run_jobs_launch", "submit_job", "submit_jobs"]

STARTS_IN_FLIGHT = 20
"""Workflow starts ``submit_jobs`` sends at once: thousands at once time out on the dev server."""


def load_job(
    entrypoint: str,
    overrides: TaskOverrides,
    *,
    minimize: Literal["cost", "time"] = "cost",
    pool: str | None = None,
) -> tuple[ManagedJobRequest, Dag]:
    """The request (its ``job_id`` still a placeholder) and the tasks as a ``Dag``, for the plan.

    ``SpecError`` (exit 2) for anything wrong. ``--name`` names the job, and the task when there
    is one; every other override applies to each task. A ``placement: SAME_INFRA`` group is placed
    now, each task pinned to the provider and region chosen for them all. With ``pool``, the job is
    one task run on a worker of that pool.
    """
    from skyhop.cli.planning import place_dag, placeable, placed_together
    from skyhop.cli.session import current_user
    from skyhop.contract.managed_jobs import ManagedJobRequest
    from skyhop.spec import Execution, Placement, SpecError, load_dag
    from skyhop.spec.limits import MAX_NAME_CHARS, check_request_size
    from skyhop.spec.pool import pool_refusal

    dag = load_dag(entrypoint, overrides.values(), overrides.secret_values().values())
    pools = [node.task.pool for node in dag.tasks if node.task.pool is not None]
    if pools:
        raise SpecError("", pool_refusal(entrypoint, pools[0].size))
    if pool is not None and len(dag.tasks) != 1:
        raise SpecError("--pool", f"a pool job is one task; {entrypoint} holds {len(dag.tasks)}")
    per_task = overrides if len(dag.tasks) == 1 else overrides.model_copy(update={"name": None})
    tasks = [placeable(per_task.apply(node.task)) for node in dag.tasks]
    dag = dag.model_copy(
        update={"tasks": [n.model_copy(update={"task": t}) for n, t in zip(dag.tasks, tasks, strict=True)]}
    )
    if dag.group is not None and dag.group.placement == Placement.SAME_INFRA:
        dag = placed_together(dag, place_dag(dag, minimize))
        tasks = [node.task for node in dag.tasks]
    name = overrides.name or dag.name or tasks[0].name or "unnamed"
    if len(name) > MAX_NAME_CHARS:
        raise SpecError("--name", f"at most {MAX_NAME_CHARS} characters, got {len(name)}")
    request = ManagedJobRequest(
        job_id=1,
        name=name,
        tasks=tasks,
        parallel=dag.execution == Execution.PARALLEL,
        group=dag.group,
        user=current_user(),
        minimize=minimize,
        pool=pool,
    )
    check_request_size(request, "managed job request")
    return request, dag


async def run_jobs_launch(request: ManagedJobRequest, *, detach: bool, num_jobs: int = 1) -> int:
    """Take ids, start the jobs' workflows, and unless ``detach`` (or several jobs) follow the job
    to its end. ``num_jobs`` copies each see their rank and the count (``ranked``)."""
    from skyhop.cli.packing import pack_task
    from skyhop.cli.session import open_client

    request = request.model_copy(update={"tasks": [await pack_task(task) for task in request.tasks]})
    client = await open_client()
    if request.pool is not None:
        from skyhop.cli.pools import pool_state

        await pool_state(client, request.pool)  # a clear line for a pool that does not run
    requests = [ranked(request, rank, num_jobs) for rank in range(num_jobs)] if num_jobs > 1 else [request]
    job_ids = await submit_jobs(client, requests)
    where = f" on pool {request.pool}" if request.pool is not None else ""
    for job_id in job_ids:
        info(f"Managed job {job_id} ({request.name}) submitted{where}.")
    if detach or len(job_ids) > 1:
        info(f"Follow one with: skyhop jobs logs {job_ids[0]} --follow")
        return 0
    return await _follow(client, job_ids[0])


def ranked(request: ManagedJobRequest, rank: int, num_jobs: int) -> ManagedJobRequest:
    """Job ``rank`` of ``num_jobs`` (``--num-jobs``): its task sees ``SKYHOP_JOB_RANK`` (0, 1, ...)
    and ``SKYHOP_NUM_JOBS``, and SkyPilot's ``SKYPILOT_JOB_RANK``/``SKYPILOT_NUM_JOBS``."""
    envs = {
        f"{prefix}_{key}": str(value)
        for prefix in ("SKYHOP", "SKYPILOT")
        for key, value in (("JOB_RANK", rank), ("NUM_JOBS", num_jobs))
    }
    tasks = [task.model_copy(update={"envs": {**task.envs, **envs}}) for task in request.tasks]
    return request.model_copy(update={"tasks": tasks})


async def submit_job(client: Client, request: ManagedJobRequest) -> int:
    """Take an id and start the job's workflow under it; the id. What ``jobs launch`` does before it
    follows the job."""
    (job_id,) = await submit_jobs(client, [request])
    return job_id


async def submit_jobs(
    client: Client, requests: list[ManagedJobRequest], *, in_flight: int = STARTS_IN_FLIGHT
) -> list[int]:
    """Take one block of consecutive ids for ``requests`` (one allocator update per 10,000) and
    start each job's workflow under its id, ``in_flight`` at a time; the ids, in order. For a
    program that submits many jobs (the scale benchmark): the allocator takes at most 10 updates
    in flight, so an id per job would cap the launch rate."""
    from skyhop.cli.job_ids import allocate_job_ids
    from skyhop.contract.job_index import MAX_IDS_PER_ALLOCATION

    ids: list[int] = []
    for start in range(0, len(requests), MAX_IDS_PER_ALLOCATION):
        count = min(MAX_IDS_PER_ALLOCATION, len(requests) - start)
        allocated = await allocate_job_ids(client, f"submit:{uuid.uuid4().hex}", count)
        ids.extend(range(allocated.first, allocated.first + count))
    gate = asyncio.Semaphore(in_flight)

    async def one(job_id: int, request: ManagedJobRequest) -> None:
        async with gate:
            await _submit(client, job_id, request)

    await asyncio.gather(*(one(job_id, r) for job_id, r in zip(ids, requests, strict=True)))
    return ids


async def _submit(client: Client, job_id: int, request: ManagedJobRequest) -> None:
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from skyhop.cli.failures import while_busy
    from skyhop.contract.job_index import MANAGED_JOB_IDS_ID, ManagedJobStatus, ManagedJobSummary
    from skyhop.contract.managed_jobs import job_resources

    request = request.model_copy(update={"job_id": job_id, "submitted_at": time.time()})
    summary = ManagedJobSummary(
        job_id=job_id,
        name=request.name,
        resources=job_resources(request.tasks),
        status=ManagedJobStatus.PENDING,
        submitted_at=request.submitted_at or time.time(),
    )
    try:
        await while_busy(lambda: _start(client, request, summary))
    except WorkflowAlreadyStartedError:
        fail(
            f"job id {job_id} belongs to an earlier job: the id allocator ({MANAGED_JOB_IDS_ID}) was "
            "reset; a new one must start above the highest id in: skyhop jobs queue -a"
        )


async def _start(client: Client, request: ManagedJobRequest, summary: ManagedJobSummary) -> None:
    """Start the job's workflow with what listings find it by: search attributes and its summary."""
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

    from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
    from skyhop.contract.job_index import MEMO_KEY, managed_job_workflow_id
    from skyhop.contract.search import managed_job_search_attributes

    await client.start_workflow(
        WorkflowType.MANAGED_JOB,
        request,
        id=managed_job_workflow_id(request.job_id),
        task_queue=WORKFLOW_QUEUE,
        search_attributes=managed_job_search_attributes(request.name, request.user),
        memo={MEMO_KEY: summary},
        # A resent start (the server was busy) finds its own workflow; an id that ran is never reused.
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
    )


async def _follow(client: Client, job_id: int) -> int:
    """Print its status changes and stream its output; exit 0 once SUCCEEDED, 1 on any other end."""
    from skyhop.cli.jobs_follow import StatusPrinter, follow_job
    from skyhop.contract.job_index import ManagedJobStatus

    try:
        state = await follow_job(client, job_id, on_state=StatusPrinter().show)
    except (KeyboardInterrupt, asyncio.CancelledError):
        info(
            f"\nDetached; managed job {job_id} keeps running. Follow it with: skyhop jobs logs {job_id} "
            f"--follow; cancel it with: skyhop jobs cancel {job_id}"
        )
        return EXIT_DETACHED
    return 0 if state.status == ManagedJobStatus.SUCCEEDED else 1
