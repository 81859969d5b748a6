"""``LockLeaseWorkflow`` against a real ``ClusterWorkflow`` (fake activities, time-skipping server):
when its launch closes, the lease gives the lock back unless a later run of the launch runs on."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.worker import Worker

from skyhop.contract import LockSignal
from skyhop.contract.clusters import ClusterRecord, LockHolder, LockLease
from skyhop.workflows.lock_lease import LockLeaseWorkflow
from tests.cluster.fakes import FakeCloud, query_status, running_cluster, up_record
from tests.cluster.test_autostop import time_skipping
from tests.conftest import run


async def _lease_ends(alive: bool) -> tuple[ClusterRecord, int, list[str]]:
    """A cluster held by ``launch:x``; the lease of ``launch:x`` is cancelled (the launch closed).
    The record once the lease's release (if any) is handled, how many releases the cluster got."""
    cloud = FakeCloud()
    cloud.launch_alive = alive
    held = up_record("leased")
    held.holder = LockHolder.launch("launch:x")
    async with time_skipping() as env, running_cluster(env.client, held, cloud) as cluster:
        queue = f"lease-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=queue, workflows=[LockLeaseWorkflow]):
            lease = await env.client.start_workflow(
                LockLeaseWorkflow.run,
                LockLease(cluster_name=cluster.id.removeprefix("cluster:"), launch_id="launch:x"),
                id=f"launch:x:lease:{uuid.uuid4().hex[:8]}",
                task_queue=queue,
            )
            await lease.cancel()  # what the server does when the launch closes
            await lease.result()  # a release it sent is in the cluster's history by now
        signals = [
            e.workflow_execution_signaled_event_attributes.signal_name
            async for e in cluster.fetch_history_events()
            if e.HasField("workflow_execution_signaled_event_attributes")
        ]
        record = await query_status(cluster)
        for _ in range(200):  # and the cluster handles it in its next workflow task
            if record.holder is None or not signals:
                break
            await asyncio.sleep(0.05)
            record = await query_status(cluster)
        return record, signals.count(LockSignal.RELEASE.value), cloud.calls


@pytest.mark.parametrize("alive", [False, True], ids=["launch-closed", "launch-runs-on"])
def test_a_lease_gives_the_lock_back_only_when_no_run_of_its_launch_is_left(alive: bool) -> None:
    record, releases, calls = run(_lease_ends(alive))
    assert "launch_running launch:x" in calls
    if alive:  # continued as new or reset: the new run holds the lock under a lease of its own
        assert releases == 0 and record.holder == LockHolder.launch("launch:x")
    else:
        assert releases == 1
        assert record.holder is None and record.status.value == "UP"
        assert record.degraded is not None and "launch launch:x ended without finishing" in record.degraded
