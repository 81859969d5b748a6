"""Steps both workflows take: running a long activity, and readying fresh nodes for a task."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from activities import jobs, sync
    from activities.models import FileMountsInput, SetupInput, SyncWorkdirInput
    from providers.base import ClusterHandle
    from spec import Task
    from workflows.contract import LONG_QUEUE
    from workflows.options import HEARTBEAT, LONG_RETRY

__all__ = ["prepare_nodes", "run_long"]


async def run_long(activity: Any, arg: Any, *, timeout: timedelta, summary: str | None = None) -> Any:
    """An activity on the long queue: it heartbeats, so a dead worker's attempt is retried elsewhere.

    Cancelled, the workflow waits until the activity has stopped its work (a setup kills its
    processes on every node): compensation that follows must not race work still going on.
    Such an activity may still complete instead; the caller checks for the cancellation after.
    """
    return await workflow.execute_activity(
        activity,
        arg,
        task_queue=LONG_QUEUE,
        start_to_close_timeout=timeout,
        heartbeat_timeout=HEARTBEAT,
        retry_policy=LONG_RETRY,
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=summary,
    )


async def prepare_nodes(
    handle: ClusterHandle,
    task: Task,
    setup_key: str,
    *,
    timeout: timedelta,
    enter: Callable[[str], None] = lambda stage: None,
) -> None:
    """What nodes need before the task's jobs run on them: workdir, file mounts, then setup.

    ``enter`` hears each stage as it begins; ``setup_key`` names the setup's node job, so a
    retried setup re-attaches instead of running twice.
    """
    if task.workdir:
        enter("sync_workdir")
        await run_long(
            sync.sync_workdir, SyncWorkdirInput(handle=handle, workdir=task.workdir), timeout=timeout
        )
    if task.file_mounts:
        enter("sync_file_mounts")
        mounts = FileMountsInput(handle=handle, file_mounts=task.file_mounts)
        await run_long(sync.sync_file_mounts, mounts, timeout=timeout)
    if task.setup:
        enter("setup")
        await run_long(jobs.run_setup, SetupInput(handle=handle, task=task, key=setup_key), timeout=timeout)
