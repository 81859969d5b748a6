"""Reporting a managed job's row to its ``JobIndexWorkflow`` shard.

Signal-with-start, so the shard need not exist yet (the first job of a thousand creates it) and
a job started by any client (the ``temporal`` CLI, a test) is indexed all the same. Idempotent: a
retried report carries the same ``seq``, which the shard keeps once.

The reports of one worker process to one shard are batched: while a signal to the shard is on
its way, the rows reported meanwhile wait, and the next signal (``rows``) carries them all. The
server takes the signals to one workflow one at a time, and a thousand jobs cancelled at once (a
thousand consecutive ids: one shard) sent two thousand signals to it, which took longer than the
cancels themselves.
"""

from __future__ import annotations

import asyncio
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

_MOST_PER_SIGNAL = 200
"""Rows in one signal: a few hundred bytes each, well below the server's payload size limits."""


class _Outbox:
    """The rows waiting for their shard's signal, by client and shard, each with its reporter's future."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[int, int], list[tuple[JobIndexRow, asyncio.Future[None]]]] = {}
        self._senders: dict[tuple[int, int], asyncio.Task[None]] = {}

    async def send(self, client: Client, row: JobIndexRow) -> None:
        key = (id(client), job_index_shard(row.summary.job_id))
        landed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((row, landed))
        if key not in self._senders:
            self._senders[key] = asyncio.create_task(self._drain(client, key))
        await landed

    async def _drain(self, client: Client, key: tuple[int, int]) -> None:
        """Send what waits for the shard, a signal at a time, until nothing does."""
        try:
            while waiting := self._waiting.pop(key, []):
                batch, rest = waiting[:_MOST_PER_SIGNAL], waiting[_MOST_PER_SIGNAL:]
                if rest:
                    self._waiting[key] = rest  # nothing was added since the pop: no await between
                try:
                    await _signal(client, key[1], [row for row, _ in batch])
                except Exception as exc:
                    _settle(batch, exc)  # each report fails, and its activity is retried
                else:
                    _settle(batch, None)
        finally:
            del self._senders[key]


def _settle(batch: list[tuple[JobIndexRow, asyncio.Future[None]]], error: Exception | None) -> None:
    for _, landed in batch:
        if landed.done():
            continue  # its activity was cancelled meanwhile
        if error is None:
            landed.set_result(None)
        else:
            landed.set_exception(error)


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


_outbox = _Outbox()


async def report_row(client: Client, row: JobIndexRow) -> None:
    """Send ``row`` to its shard (with the rows reported meanwhile), starting the shard if it does not run."""
    await _outbox.send(client, row)


@activity.defn
async def index_job_row(row: JobIndexRow) -> None:
    """What ``ManagedJobWorkflow`` runs on each status change (a workflow cannot signal-with-start)."""
    await report_row(activity.client(), row)
