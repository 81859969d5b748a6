"""Reconciling with a provider that reports a preempted node says so, on the time-skipping server."""

from __future__ import annotations

from skyhop.contract import ClusterStatus, JobStatus
from skyhop.contract.clusters import JobSubmission
from skyhop.providers.base import NodeStatus
from skyhop.spec import Task
from skyhop.workflows.cluster import ClusterWorkflow
from tests.cluster.fakes import FakeCloud, running_cluster, up_record
from tests.cluster.test_autostop import time_skipping
from tests.conftest import run


def test_a_preempted_node_fails_its_job_and_the_record_says_it_was_preempted() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        cloud.hold_jobs = True
        async with time_skipping() as env, running_cluster(env.client, up_record("spot"), cloud) as h:
            job = await h.execute_update(
                ClusterWorkflow.submit_job, JobSubmission(request_id="r1", task=Task(run="sleep 600"))
            )
            cloud.statuses = [NodeStatus.PREEMPTED]
            record = await h.execute_update(ClusterWorkflow.refresh)
            assert record.degraded == "node 0 was preempted (changed outside skyhop)"
            assert record.status == ClusterStatus.TERMINATED
            ended = next(j for j in record.jobs if j.job_id == job.job_id)
            assert ended.status == JobStatus.FAILED and "node 0 was preempted" in (ended.error or "")

    run(scenario())
