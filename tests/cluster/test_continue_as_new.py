"""Continue-as-new keeps the cluster's history bounded without losing or repeating a job.

Forced with a tiny ``history_limit``: once on fakes (time-skipping server, every task replayed),
once on a real dev server and worker with real jobs running across the boundary.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from skyhop.cli.failures import while_busy
from skyhop.contract import WORKFLOW_QUEUE, ClusterUpdate, JobStatus, cluster_workflow_id
from skyhop.contract.clusters import ClusterInput, ClusterRecord, JobRecord, JobSubmission
from skyhop.contract.search import cluster_search_attributes
from skyhop.spec import Task
from skyhop.workflows.cluster import ClusterWorkflow
from tests.cluster.fakes import FakeCloud, query_status, running_cluster, up_record
from tests.cluster.test_autostop import time_skipping
from tests.cluster.test_queue_local import HALF
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for, down, launch
from tests.integration.support import record as current


async def _runs(client: Client, workflow_id: str) -> int:
    return len([wf async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'")])


def test_queue_survives_continue_as_new_and_submits_stay_idempotent() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        async with time_skipping() as env, running_cluster(env.client, up_record("can"), cloud, 40) as h:
            first_run = (await h.describe()).run_id
            jobs: list[JobRecord] = []
            for i in range(12):
                submission = JobSubmission(request_id=f"r{i}", task=Task(run="true"))
                jobs.append(await h.execute_update(ClusterWorkflow.submit_job, submission))
            assert [job.job_id for job in jobs] == list(range(1, 13))
            # A retried submit (same request id, a new update) gets the job it created, in any run.
            retried = JobSubmission(request_id="r3", task=Task(run="true"))
            again = await h.execute_update(ClusterWorkflow.submit_job, retried, id="retry-of-r3")
            assert again.job_id == 4
            while True:
                record = await query_status(h)
                if all(job.status == JobStatus.SUCCEEDED for job in record.jobs):
                    break
                await asyncio.sleep(0.05)
            assert len(record.jobs) == 12 and record.next_job_id == 13
            assert (await h.describe()).run_id != first_run
            started = [call for call in cloud.calls if call.startswith("start_job")]
            assert sorted(set(started)) == sorted(f"start_job {i}" for i in range(1, 13))

    run(scenario())


@pytest.mark.integration
def test_real_jobs_run_once_across_continue_as_new(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    name = f"can-{uuid.uuid4().hex[:6]}"
    marks = tmp_path / "marks"
    workflow_id = cluster_workflow_id(name)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        # The launch finds this workflow (USE_EXISTING) and leaves its tiny history limit in place.
        await client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput(record=ClusterRecord(name=name, user="tester"), history_limit=60),
            id=workflow_id,
            task_queue=WORKFLOW_QUEUE,
            search_attributes=cluster_search_attributes(name, "tester"),
        )
        await launch(client, name, Task())
        handle = client.get_workflow_handle(workflow_id)
        task = Task(run=f"echo start $SKYHOP_TASK_ID >> {marks}; sleep 1.5; echo end >> {marks}")
        task = task.model_copy(update={"resources": task.resources.model_copy(update={"cpus": HALF})})
        for i in range(6):
            submission = JobSubmission(request_id=f"job-{i}", task=task)
            await while_busy(
                lambda s=submission: handle.execute_update(
                    ClusterUpdate.SUBMIT_JOB, s, id=s.request_id, result_type=JobRecord
                )
            )
        for _ in range(600):
            record = await current(client, name)
            if all(job.status.done for job in record.jobs):
                break
            await asyncio.sleep(0.1)
        assert [job.status for job in record.jobs] == [JobStatus.SUCCEEDED] * 6
        lines = marks.read_text().splitlines()
        assert sorted(line for line in lines if line.startswith("start")) == sorted(
            f"start {job.task_id}" for job in record.jobs
        )
        assert lines.count("end") == 6
        assert await _runs(client, workflow_id) > 1
        await down(client, name)

    run(scenario())
