"""``LockLeaseWorkflow``: gives a cluster's lock back for a launch that ended without doing so.

A launch that is terminated or times out runs no more code, so it cannot release what it holds.
Before it claims a cluster's lock, a launch starts this workflow as its child with the parent
close policy REQUEST_CANCEL: whenever the launch closes, however it closes (completed, failed,
cancelled, terminated, timed out, continued as new, reset), the server cancels the lease. The
lease then asks whether a run of the launch is still running (a continue-as-new or a reset runs
on under the same workflow id, with a lease of its own); if none is, it sends the cluster a
``release`` marked ``abandoned``, which frees the lock (or the launch's place in the queue). A
launch that released the lock itself makes that release a no-op.

Why this way, and not the cluster watching its holder: while the launch runs, the lease costs
nothing at all — no timer, no activity slot, no heartbeats, no polling (a watcher activity would
hold a long-queue slot and write a heartbeat every few seconds for as long as the lock is held,
days for a ``--retry-until-up`` launch, and would stop the time-skipping test server from
skipping). Temporal itself notices that the launch has closed, within a second or so.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from skyhop.activities.clusters import ClusterActivities
    from skyhop.activities.models import LaunchRunningInput
    from skyhop.contract import LOCK_LEASE_WORKFLOW, SHORT_QUEUE, LockSignal, cluster_workflow_id
    from skyhop.contract.clusters import LockLease, Release
    from skyhop.workflows.options import SHORT_RETRY

__all__ = ["LockLeaseWorkflow", "lease_id"]


def lease_id(launch_id: str, unique: str) -> str:
    """One lease per run of a launch (``unique`` differs per run): a run that continued as new
    starts its own while the previous run's lease may still be ending."""
    return f"{launch_id}:lease:{unique}"


@workflow.defn(name=LOCK_LEASE_WORKFLOW)
class LockLeaseWorkflow:
    @workflow.run
    async def run(self, lease: LockLease) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # the launch closed
            await workflow.wait_condition(lambda: False)
        running = await workflow.execute_activity_method(
            ClusterActivities.launch_running,
            LaunchRunningInput(workflow_id=lease.launch_id),
            task_queue=SHORT_QUEUE,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=SHORT_RETRY,
        )
        if running:
            return  # a later run of the launch holds (or waits for) the lock, under a lease of its own
        cluster = workflow.get_external_workflow_handle(cluster_workflow_id(lease.cluster_name))
        with contextlib.suppress(FailureError):  # the cluster is gone: nothing to give back
            await cluster.signal(
                LockSignal.RELEASE.value, Release(launch_id=lease.launch_id, failed=True, abandoned=True)
            )
