"""Steps the workflows share: running a long activity, readying fresh nodes for a task, and asking
the provider whether a cluster's nodes are still there.

Long activities are awaited until their cancellation completes, and such an activity may finish
with a result instead (an attempt that returns its capacity failure just before it sees the
cancel); Temporal then hands back the result and the cancellation is consumed, so a workflow asks
``workflow.cancellation_reason()`` after each of them (``raise_if_cancelled``) rather than going
on to its next step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from skyhop.activities import cluster_ops, jobs, storage, sync
    from skyhop.activities.cluster_ops import ProbeResult
    from skyhop.activities.models import (
        AttachInput,
        BucketsInput,
        FileMountsInput,
        SetupInput,
        SyncWorkdirInput,
    )
    from skyhop.contract import LONG_QUEUE, SHORT_QUEUE, LaunchStage
    from skyhop.contract.clusters import ClusterStorage
    from skyhop.providers.base import ClusterHandle, NodeStatus
    from skyhop.spec import Task
    from skyhop.spec.packed import PackedFiles
    from skyhop.storage.plan import MountPlan, local_file_mounts
    from skyhop.workflows.options import HEARTBEAT, LONG_RETRY, queue_for

__all__ = [
    "attach_buckets",
    "delete_created_buckets",
    "history_is_long",
    "node_statuses",
    "prepare_nodes",
    "raise_if_cancelled",
    "raise_if_cancelled_by",
    "release_buckets",
    "run_long",
]


async def run_long(activity: Any, arg: Any, *, timeout: timedelta, summary: str | None = None) -> Any:
    """An activity on the long queue: it heartbeats, so a dead worker's attempt is retried elsewhere.

    Cancelled, the workflow waits until the activity has stopped its work (a setup kills its
    processes on every node): compensation that follows must not race work still going on.
    Such an activity may still complete instead; the caller checks for the cancellation after.
    """
    return await workflow.execute_activity(
        activity,
        arg,
        task_queue=queue_for(LONG_QUEUE, arg),
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
    mounts: list[MountPlan],
    timeout: timedelta,
    enter: Callable[[LaunchStage], None] = lambda stage: None,
) -> None:
    """What nodes need before the task's jobs run on them: workdir, file mounts, then setup.

    ``mounts`` is the task's ``storage_plan``, computed once by the caller, which needs it too;
    ``enter`` hears each stage as it begins; ``setup_key`` names the setup's node job, so a
    retried setup re-attaches instead of running twice. Buckets are created and filled first,
    then copied or mounted on the nodes (``attach_buckets``), then local file mounts are copied.
    """
    packed = task.packed or PackedFiles()
    if task.has_workdir:
        enter(LaunchStage.SYNC_WORKDIR)
        workdir = SyncWorkdirInput(
            handle=handle, workdir=task.workdir or "", git=task.workdir_git, packed=packed.workdir
        )
        await run_long(sync.sync_workdir, workdir, timeout=timeout)
    if task.file_mounts:
        enter(LaunchStage.SYNC_FILE_MOUNTS)
        if mounts:
            buckets = BucketsInput(cluster_name=handle.cluster_name, mounts=mounts, packed=packed.sources)
            await run_long(storage.prepare_buckets, buckets, timeout=timeout)
            await attach_buckets(handle, mounts, timeout=timeout)
        local = local_file_mounts(task.file_mounts)
        if local:
            packed_mounts = {remote: ref for remote, ref in packed.file_mounts.items() if remote in local}
            files = FileMountsInput(handle=handle, file_mounts=local, packed=packed_mounts)
            await run_long(sync.sync_file_mounts, files, timeout=timeout)
    if task.needs_setup:
        enter(LaunchStage.SETUP)
        await run_long(jobs.run_setup, SetupInput(handle=handle, task=task, key=setup_key), timeout=timeout)


async def attach_buckets(handle: ClusterHandle, mounts: list[MountPlan], *, timeout: timedelta) -> None:
    """Copy or mount buckets on the nodes (again, on nodes that were stopped)."""
    if mounts:
        await run_long(storage.attach_storage, AttachInput(handle=handle, mounts=mounts), timeout=timeout)


async def release_buckets(handle: ClusterHandle, used: ClusterStorage, *, timeout: timedelta) -> None:
    """Before nodes stop or go: flush and unmount what any launch mounted on them."""
    if used.mounted:
        await run_long(storage.detach_storage, handle, timeout=timeout)


async def delete_created_buckets(cluster_name: str, used: ClusterStorage, *, timeout: timedelta) -> None:
    """On ``down``: delete the buckets skyhop created for this cluster in any launch, not persistent."""
    if used.buckets:
        request = BucketsInput(cluster_name=cluster_name, buckets=used.buckets)
        await run_long(storage.delete_buckets, request, timeout=timeout)


_ASK_ONCE = RetryPolicy(maximum_attempts=1)
"""The provider is asked once per call: the caller decides when to ask again."""


async def node_statuses(
    handle: ClusterHandle, retry_policy: RetryPolicy = _ASK_ONCE
) -> list[NodeStatus] | None:
    """The provider's view of each node (``probe_cluster``), or None when it cannot tell (an SSH
    pool); an ``ActivityError`` when it could not be asked."""
    probe: ProbeResult = await workflow.execute_activity(
        cluster_ops.probe_cluster,
        handle,
        task_queue=queue_for(SHORT_QUEUE, handle),
        start_to_close_timeout=timedelta(seconds=60),
        retry_policy=retry_policy,
        summary="are the nodes still there?",
    )
    return probe.statuses


def raise_if_cancelled() -> None:
    """Re-raise a cancellation an activity's completion consumed (see the module docstring)."""
    if workflow.cancellation_reason() is not None:
        raise asyncio.CancelledError("the workflow was cancelled")


def raise_if_cancelled_by(exc: ActivityError | ApplicationError) -> None:
    """An activity that failed because its caller was cancelled (a workflow's cancel, or a task of
    it cancelled: a managed job's parallel sibling failed, a service's replica scaled down) arrives
    as an ``ActivityError``: go on as the cancellation it is."""
    if isinstance(exc.cause, CancelledError) or workflow.cancellation_reason() is not None:
        raise asyncio.CancelledError("the task was cancelled") from exc


def history_is_long(limit: int | None) -> bool:
    """Whether to continue as new: the history has ``limit`` events, or else Temporal suggests it."""
    info = workflow.info()
    if limit is not None and info.get_current_history_length() >= limit:
        return True
    return info.is_continue_as_new_suggested()
