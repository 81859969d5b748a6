"""What the ``jobs pool`` commands do, against a connected Temporal client.

A pool is found by its workflow (``pool:<name>``) and read by its ``state`` query; a listing asks
visibility for running workflows of kind ``pool``. ``apply`` starts the workflow unless it runs, then
sends it the task and size (update ``apply``); ``down`` cancels it and waits until every worker is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyhop.cli.failures import while_busy
from skyhop.cli.named_workflows import named_states, query_state
from skyhop.cli.output import info, print_json, table
from skyhop.contract import WorkflowKind

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.contract.pools import PoolState
    from skyhop.spec import Task

__all__ = ["PoolNotFoundError", "pool_state", "run_pool_apply", "run_pool_down", "run_pool_status"]


class PoolNotFoundError(LookupError):
    """No running pool has that name."""


async def pool_state(client: Client, name: str) -> PoolState:
    """The pool's state, by query; ``PoolNotFoundError`` when it does not run."""
    from skyhop.contract.pools import PoolQuery, PoolState, PoolStatus, pool_workflow_id

    state = await query_state(client, pool_workflow_id(name), PoolQuery.STATE, PoolState)
    if state is None or state.status == PoolStatus.DOWN:  # a closed workflow answers queries too
        raise PoolNotFoundError(f"pool {name!r} not found; see 'skyhop jobs pool status'")
    return state


async def run_pool_apply(name: str, task: Task, workers: int) -> int:
    """Start the pool unless it runs, then give it ``task`` and ``workers``."""
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

    from skyhop.cli.packing import pack_task
    from skyhop.cli.session import current_user, open_client
    from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
    from skyhop.contract.pools import PoolApply, PoolRequest, PoolState, PoolUpdate, pool_workflow_id
    from skyhop.contract.search import pool_search_attributes
    from skyhop.spec.limits import check_request_size

    applied = PoolApply(task=await pack_task(task), workers=workers)
    check_request_size(applied, "pool")
    client = await open_client()
    user = current_user()
    handle = await client.start_workflow(
        WorkflowType.POOL,
        PoolRequest(name=name, user=user),
        id=pool_workflow_id(name),
        task_queue=WORKFLOW_QUEUE,
        search_attributes=pool_search_attributes(name, user),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )
    state = await while_busy(lambda: handle.execute_update(PoolUpdate.APPLY, applied, result_type=PoolState))
    info(f"Pool {name} applied (version {state.version}): {workers} worker{'s' if workers != 1 else ''}.")
    info(
        f"Follow it with: skyhop jobs pool status {name}; run jobs with: skyhop jobs launch --pool {name} JOB"
    )
    return 0


def _worker_rows(state: PoolState) -> list[list[str]]:
    return [
        [
            state.name,
            str(w.worker_id),
            w.cluster_name,
            str(w.version),
            w.handle.offering.location if w.handle is not None else "-",
            w.status.value,
            str(w.job_id) if w.job_id is not None else "-",
            w.message or "",
        ]
        for w in state.workers
    ]


def _as_item(state: PoolState) -> dict[str, object]:
    item = state.model_dump(mode="json", exclude={"task", "workers"})
    item["workers"] = [
        {
            **w.model_dump(mode="json", exclude={"handle", "job_workflow"}),
            "infra": w.handle.offering.location if w.handle is not None else None,
        }
        for w in state.workers
    ]
    item["waiting"] = [claim.job_id for claim in state.waiting]
    return item


async def run_pool_status(name: str | None, *, as_json: bool) -> int:
    from skyhop.cli.session import open_client

    client = await open_client()
    states = await named_states(client, name, WorkflowKind.POOL, pool_state, PoolNotFoundError)
    if as_json:
        print_json("pools", [_as_item(state) for state in states])
        return 0
    if not states:
        info("No pools.")
        return 0
    table(
        ["NAME", "STATUS", "VERSION", "WORKERS", "BUSY", "WAITING JOBS"],
        [
            [
                s.name,
                s.status.value,
                str(s.version),
                f"{sum(w.status in ('IDLE', 'BUSY') for w in s.workers)}/{s.workers_wanted}",
                str(sum(w.status == "BUSY" for w in s.workers)),
                str(len(s.waiting)),
            ]
            for s in states
        ],
    )
    rows = [row for state in states for row in _worker_rows(state)]
    if rows:
        print()
        table(["POOL", "ID", "CLUSTER", "VERSION", "INFRA", "STATUS", "JOB", "MESSAGE"], rows)
    return 0


async def run_pool_down(name: str) -> int:
    """Cancel the pool's workflow and wait until its jobs are cancelled and every worker is gone."""
    from skyhop.cli.session import open_client
    from skyhop.contract.pools import PoolState, pool_workflow_id

    client = await open_client()
    await pool_state(client, name)  # a clear line for a name that does not run
    info(f"Taking down pool {name}: cancelling its jobs, tearing its workers down ...")
    handle = client.get_workflow_handle(pool_workflow_id(name), result_type=PoolState)
    await handle.cancel()
    await handle.result()
    info(f"Pool {name} is down: its workers are gone.")
    return 0
