"""Reporting a managed job's row to its ``JobIndexWorkflow`` shard.

Signal-with-start, so the shard need not exist yet (the first job of a thousand creates it) and
a job started by any client (the ``temporal`` CLI, a test) is indexed all the same. Idempotent: a
retried report carries the same ``seq``, which the shard keeps once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.managed_jobs import (
    JobIndexInput,
    JobIndexRow,
    JobIndexSignal,
    job_index_shard,
    job_index_workflow_id,
)

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["index_job_row", "report_row"]


async def report_row(client: Client, row: JobIndexRow) -> None:
    """Send ``row`` to its shard, starting the shard if it does not run."""
    shard = job_index_shard(row.summary.job_id)
    await client.start_workflow(
        WorkflowType.JOB_INDEX,
        JobIndexInput(shard=shard),
        id=job_index_workflow_id(shard),
        task_queue=WORKFLOW_QUEUE,
        start_signal=JobIndexSignal.ROW.value,
        start_signal_args=[row],
    )


@activity.defn
async def index_job_row(row: JobIndexRow) -> None:
    """What ``ManagedJobWorkflow`` runs on each status change (a workflow cannot signal-with-start)."""
    await report_row(activity.client(), row)
