"""Reporting a managed job's row to its ``JobIndexWorkflow`` shard.

Signal-with-start, so the shard need not exist yet (the first job of a thousand creates it) and
a job started by any client (the ``temporal`` CLI, a test) is indexed all the same. Idempotent: a
retried report carries the same ``seq``, which the shard keeps once.

The reports of one worker process to one shard are batched (``activities.signal_batches``): a
signal (``rows``) carries every row reported while the one before it was on its way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from skyhop.activities.signal_batches import SignalBatches
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.job_index import (
    JobIndexInput,
    JobIndexRow,
    JobIndexSignal,
    job_index_shard,
    job_index_workflow_id,
)

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["index_job_row", "report_row"]

_MOST_PER_SIGNAL = 200
"""Rows in one signal: a few hundred bytes each, well below the server's payload size limits."""


async def _signal(client: Client, shard: int, rows: list[JobIndexRow]) -> None:
    """One signal-with-start to the shard, starting it if it does not run."""
    await client.start_workflow(
        WorkflowType.JOB_INDEX,
        JobIndexInput(shard=shard),
        id=job_index_workflow_id(shard),
        task_queue=WORKFLOW_QUEUE,
        start_signal=JobIndexSignal.ROWS.value,
        start_signal_args=[rows],
    )


_outbox: SignalBatches[int, JobIndexRow] = SignalBatches(_signal, _MOST_PER_SIGNAL)


async def report_row(client: Client, row: JobIndexRow) -> None:
    """Send ``row`` to its shard (with the rows reported meanwhile), starting the shard if it does not run."""
    await _outbox.send(client, job_index_shard(row.summary.job_id), row)


@activity.defn
async def index_job_row(row: JobIndexRow) -> None:
    """What ``ManagedJobWorkflow`` runs on each status change (a workflow cannot signal-with-start)."""
    await report_row(activity.client(), row)
