"""Managed jobs for testing the ``jobs`` commands without ``ManagedJobWorkflow``'s real work.

A listed job is a workflow with a managed job's id, search attributes and memo, started on a
task queue no worker polls, and its row in the job index, reported as a real job reports it:
``jobs queue`` lists it, Temporal takes its cancel, and nothing runs it. ``jobs queue`` asks the
shards up to the allocator's last id, so a listed job takes its id from the allocator
(``allocated_ids``).
A scripted job (``ScriptedJob``, a test worker's ``ManagedJobWorkflow`` on a queue of its own)
also answers the ``state`` query with whatever state the test sets.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from typing import Any

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from skyhop.activities.job_index import report_row
from skyhop.cli.job_ids import allocate_job_ids
from skyhop.contract import WorkflowType
from skyhop.contract.job_index import (
    MEMO_KEY,
    JobIndexRow,
    ManagedJobQuery,
    ManagedJobStatus,
    managed_job_workflow_id,
)
from skyhop.contract.managed_jobs import ManagedJobState
from skyhop.contract.search import managed_job_search_attributes

__all__ = ["SET_STATE", "ScriptedJob", "allocated_ids", "fake_job_id", "start_listed", "user_env"]

SET_STATE = "test_set_state"
"""The scripted job's signal: its new ``ManagedJobState`` (it completes once the state is done)."""

NOBODY_POLLS = "managed-jobs-nobody-polls"
"""The task queue of listed jobs: one for them all (each task queue costs the server a manager)."""
_ids = itertools.count(int(time.time()) % 1_000_000 * 1_000 + 10_000_000)


def fake_job_id() -> int:
    """An id far from the allocator's (which hands out 1, 2, ...), unique in the session."""
    return next(_ids)


async def allocated_ids(client: Client, count: int) -> list[int]:
    """``count`` consecutive ids from the session's allocator, as ``submit_jobs`` takes them."""
    block = await allocate_job_ids(client, f"test-{uuid.uuid4().hex}", count)
    return list(range(block.first, block.first + count))


def user_env(cli_env: dict[str, str]) -> tuple[dict[str, str], str]:
    """``cli_env`` as a user of its own (``getpass`` reads LOGNAME first), so listings see only the
    test's jobs."""
    user = f"u{uuid.uuid4().hex[:10]}"
    return {**cli_env, "LOGNAME": user, "USER": user}, user


async def start_listed(
    client: Client, state: ManagedJobState, task_queue: str | None = None
) -> WorkflowHandle[Any, Any]:
    """A job as visibility lists it; on ``task_queue`` (default: one nobody polls) as ``ScriptedJob``."""
    attributes = managed_job_search_attributes(state.name, state.user, state.status)
    summary = state.summary()
    handle = await client.start_workflow(
        WorkflowType.MANAGED_JOB,
        state,
        id=managed_job_workflow_id(state.job_id),
        task_queue=task_queue or NOBODY_POLLS,
        search_attributes=attributes,
        memo={MEMO_KEY: summary},
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,  # sent again, it finds its workflow
    )
    await report_row(client, JobIndexRow(summary=summary, user=state.user, seq=1))
    return handle


@workflow.defn(name=WorkflowType.MANAGED_JOB, sandboxed=False)
class ScriptedJob:
    """Answers ``state`` with what the test sets; ends when that state is done, or when cancelled."""

    @workflow.init
    def __init__(self, state: ManagedJobState) -> None:
        self.current = state

    @workflow.run
    async def run(self, state: ManagedJobState) -> ManagedJobState:
        try:
            await workflow.wait_condition(lambda: self.current.status.done)
        except asyncio.CancelledError:
            self.current = self.current.model_copy(update={"status": ManagedJobStatus.CANCELLED})
        return self.current

    @workflow.query(name=ManagedJobQuery.STATE.value)
    def state(self) -> ManagedJobState:
        return self.current

    @workflow.signal(name=SET_STATE)
    def set_state(self, state: ManagedJobState) -> None:
        self.current = state
