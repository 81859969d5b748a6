"""Driving managed jobs from a test: start one, wait on its state, watch the sim cloud's instances;
and states and log-store files for tests that need a job without running one."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Replayer

from skyhop.cli.failures import asked_again
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.job_index import (
    JobIndexRow,
    ManagedJobQuery,
    ManagedJobStatus,
    ManagedJobSummary,
    managed_job_workflow_id,
)
from skyhop.contract.managed_jobs import ManagedJobRequest, ManagedJobState, ManagedTaskState, TaskAttempt
from skyhop.providers.sim import SimCloud
from skyhop.spec import Task
from skyhop.storage.logs import LogReader, attempt_stream, chunk_key, log_store
from tests.helpers import wait_for

__all__ = [
    "alive",
    "assert_replays",
    "every_run_events",
    "attempt",
    "gate",
    "index_row",
    "job_log",
    "job_state",
    "next_job_id",
    "open_gate",
    "start_job",
    "state_of",
    "until_state",
    "write_attempt",
]

_IDS = itertools.count(os.getpid() * 1000)
"""Job ids unique in the session (the allocator is another workflow's business)."""


def next_job_id() -> int:
    return next(_IDS)


async def start_job(
    client: Client, tasks: list[Task], *, name: str = "mj", job_id: int | None = None, **fields: object
) -> WorkflowHandle[object, ManagedJobState]:
    request = ManagedJobRequest(
        job_id=job_id or next_job_id(), name=name, tasks=tasks, user="tester", **fields
    )
    handle: WorkflowHandle[object, ManagedJobState] = await client.start_workflow(
        WorkflowType.MANAGED_JOB,
        request,
        id=managed_job_workflow_id(request.job_id),
        task_queue=WORKFLOW_QUEUE,
        result_type=ManagedJobState,
    )
    return handle


async def state_of(handle: WorkflowHandle[object, ManagedJobState]) -> ManagedJobState:
    result: ManagedJobState = await asked_again(
        lambda: handle.query(ManagedJobQuery.STATE, result_type=ManagedJobState)
    )
    return result


async def until_state(
    handle: WorkflowHandle[object, ManagedJobState],
    predicate: Callable[[ManagedJobState], bool],
    what: str,
    timeout: float = 60,
    *,
    each: Callable[[], object] = lambda: None,
) -> ManagedJobState:
    """Poll the job's state until ``predicate`` holds; ``each`` runs on every poll (to watch the cloud)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        each()
        state = await state_of(handle)
        if predicate(state):
            return state
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; state: {state}")
        await asyncio.sleep(0.1)


def alive(cluster: str) -> list[dict[str, object]]:
    """The cluster's instances that are not terminated, as the sim cloud's API lists them."""
    return SimCloud().describe(cluster)


def preempt_now(cluster: str) -> None:
    """Preempt the cluster's nodes now, once the test saw its run get as far as it needs: a plan's
    ``preempt_after_s`` counts from the launch, and on a loaded machine a run can start after it."""
    SimCloud().schedule_preemption([str(i["instance_id"]) for i in alive(cluster)], 0.0)


def gate(folder: Path, name: str = "go") -> str:
    """A shell loop a job waits in until the test opens the gate (``open_gate``): no timing involved."""
    return f"while [ ! -e {folder / name} ]; do sleep 0.05; done"


def open_gate(folder: Path, name: str = "go") -> None:
    (folder / name).touch()


def job_log(job_id: int, task_index: int, attempt: int) -> str:
    """An attempt's output in the store so far (rank 0's, as ``jobs logs`` reads it)."""
    reader = LogReader(log_store(), attempt_stream(job_id, task_index, attempt), 0)
    return b"".join(iter(reader.read, b"")).decode()


def until_log(job_id: int, task_index: int, attempt: int, text: str, timeout: float = 60) -> None:
    wait_for(
        lambda: text in job_log(job_id, task_index, attempt), timeout, f"{text!r} in attempt {attempt}'s log"
    )


async def until_reports_settled(handle: WorkflowHandle[object, ManagedJobState], timeout: float = 60) -> None:
    """Until the job's last status report to the job index is done, and its workflow task too.

    A running job holds no activity of its own, but the report of its RUNNING (one signal-with-start)
    may still be in flight when it is first seen RUNNING, longer on a busy machine; then it
    continues as new, and its next run's first workflow task must be done too.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        description = (await handle.describe()).raw_description
        pending = [a.activity_type.name for a in description.pending_activities]
        assert set(pending) <= {"index_job_row"}, f"{handle.id} holds {pending}"
        if (
            not pending
            and not description.HasField("pending_workflow_task")
            and await _last_task_done(handle)
        ):
            return
        assert loop.time() < deadline, f"{handle.id}: its status report never settled"
        await asyncio.sleep(0.1)


async def _last_task_done(handle: WorkflowHandle[object, ManagedJobState]) -> bool:
    """Whether the latest run's last workflow task completed (it is not mid-start)."""
    completed = False
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_scheduled_event_attributes"):
            completed = False
        elif event.HasField("workflow_task_completed_event_attributes"):
            completed = True
    return completed


async def every_run_events(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """A job's history events, run after run from its first (it continues as new while it runs)."""
    latest = (await client.get_workflow_handle(workflow_id).describe()).raw_description
    events: list[HistoryEvent] = []
    run_id = latest.workflow_execution_info.first_run_id
    while run_id:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        run = [event async for event in handle.fetch_history_events()]
        events += run
        continued = run[-1].workflow_execution_continued_as_new_event_attributes
        run_id = continued.new_execution_run_id
    return events


async def assert_replays(client: Client, handle: WorkflowHandle[object, ManagedJobState]) -> None:
    """Every run of the job replays from its history with today's code: the workflow is deterministic."""
    from skyhop.workflows.managed_job import ManagedJobWorkflow

    replayer = Replayer(workflows=[ManagedJobWorkflow], data_converter=client.data_converter)
    async for execution in client.list_workflows(f"WorkflowId = '{handle.id}'"):
        history = await client.get_workflow_handle(handle.id, run_id=execution.run_id).fetch_history()
        await replayer.replay_workflow(history)


def attempt(number: int, *, location: str | None = "sim/r1/r1a", outcome: str | None = None) -> TaskAttempt:
    """An attempt, ended with ``outcome`` when one is given."""
    now = time.time()
    return TaskAttempt(
        number=number,
        cluster_name="job-1",
        location=location,
        started_at=now,
        ended_at=now if outcome is not None else None,
        outcome=outcome,
    )


def job_state(
    job_id: int, attempts: list[list[TaskAttempt]], status: ManagedJobStatus = ManagedJobStatus.RUNNING
) -> ManagedJobState:
    """A job whose task ``k`` had ``attempts[k]``."""
    tasks = [
        ManagedTaskState(
            index=index,
            name=f"t{index}",
            status=status,
            cluster_name=f"job-{job_id}",
            task_id=f"sky-managed-0_x_{job_id}-{index}",
            recoveries=max(len(tried) - 1, 0),
            attempts=tried,
        )
        for index, tried in enumerate(attempts)
    ]
    return ManagedJobState(
        job_id=job_id,
        name="x",
        user="tester",
        status=status,
        submitted_at=time.time(),
        resources="1x[any]",
        tasks=tasks,
    )


def write_attempt(job_id: int, task_index: int, number: int, text: str) -> None:
    """Append ``text`` to an attempt's output in the store, as its watch hub does (one chunk)."""
    stream = attempt_stream(job_id, task_index, number)
    size = len(job_log(job_id, task_index, number).encode())
    log_store().put_bytes(chunk_key(stream, 0, size), text.encode())


def index_row(
    job_id: int, status: ManagedJobStatus, seq: int, *, user: str = "al", name: str = "train"
) -> JobIndexRow:
    """A job-index row of a job, as its workflow reports it."""
    summary = ManagedJobSummary(
        job_id=job_id, name=name, resources="1x[any]", status=status, submitted_at=0.0
    )
    return JobIndexRow(summary=summary, user=user, seq=seq)
