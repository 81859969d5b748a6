"""A job's end is an event: one watcher per cluster, no activity held per running job.

A small test-only workflow plays the managed job that comes next: it submits jobs with ``notify``
set to itself and waits for the cluster's ``JobEnded`` signals, across worker kills and a node
that vanishes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from skyhop.activities.job_watch import ClusterWatch
from skyhop.activities.models import SubmitJobInput, WatchedJob, WatchJobsInput, WatchJobsResult
from skyhop.contract import JOB_ENDED_SIGNAL, SHORT_QUEUE, JobStatus, cluster_workflow_id
from skyhop.contract.clusters import CancelRequest, CancelResult, JobEnded, JobRecord, JobSubmission
from skyhop.providers.base import NodeStatus, ProvisionRequest
from skyhop.providers.registry import get_provider
from skyhop.providers.runtime.jobs import JobOutcome, NodeJobStatus
from skyhop.providers.sim import SimCloud
from skyhop.spec import Resources, Task
from skyhop.workflows.cluster import ClusterWorkflow
from tests.cluster.fakes import FakeCloud, query_status, running_cluster, up_record
from tests.cluster.test_autostop import time_skipping
from tests.cluster.test_queue_local import HALF
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, cluster_up, current_record, unique_cluster
from tests.integration.support import record as fetch_record
from tests.providers.sim_support import enabled_sim

ROUNDS = 5


class SubmitAndWaitInput(BaseModel):
    cluster_name: str
    tasks: list[Task]
    expect: int = 0
    """Ends to wait for besides those of ``tasks`` (of jobs a test submitted itself)."""


@workflow.defn(name="SubmitAndWaitTest")
class SubmitAndWait:
    """Submit jobs to a cluster, asking to be told of their ends; return every ``JobEnded`` heard."""

    def __init__(self) -> None:
        self.ended: list[JobEnded] = []

    @workflow.signal(name=JOB_ENDED_SIGNAL)
    def job_ended(self, ended: JobEnded) -> None:
        self.ended.append(ended)

    @workflow.run
    async def run(self, request: SubmitAndWaitInput) -> list[JobEnded]:
        me = workflow.info().workflow_id
        for i, task in enumerate(request.tasks):
            submission = JobSubmission(request_id=f"{me}:{i}", task=task, notify=me)
            await workflow.execute_activity(
                "submit_job",
                SubmitJobInput(cluster_name=request.cluster_name, submission=submission),
                task_queue=SHORT_QUEUE,
                start_to_close_timeout=timedelta(seconds=60),
                result_type=JobRecord,
            )
        await workflow.wait_condition(lambda: len(self.ended) >= len(request.tasks) + request.expect)
        return self.ended


@asynccontextmanager
async def waiter_worker(client: Client) -> AsyncIterator[str]:
    """Serve ``SubmitAndWait`` on a task queue of its own, in this process (not the killed worker)."""
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client, task_queue=queue, workflows=[SubmitAndWait], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        yield queue


async def _signals_sent(client: Client, cluster: str) -> int:
    """How many ``JobEnded`` signals the cluster's current run has sent (each is a history event)."""
    history = await client.get_workflow_handle(cluster_workflow_id(cluster)).fetch_history()
    return sum(
        1
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
        and event.signal_external_workflow_execution_initiated_event_attributes.signal_name
        == JOB_ENDED_SIGNAL
    )


def _started(address: str, cluster: str, first: int, count: int) -> bool:
    """Whether jobs ``first`` .. ``first + count - 1`` (by index) all got past their start."""
    jobs = current_record(address, cluster).jobs[first:]
    return len(jobs) == count and all(j.status == JobStatus.RUNNING or j.status.done for j in jobs)


def test_running_jobs_hold_one_watcher_not_an_activity_each() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        cloud.hold_jobs = True
        async with time_skipping() as env, running_cluster(env.client, up_record("w", cpus=2), cloud) as h:
            half = Task(run="sleep 1", resources=Resources(cpus="0.5"))
            for i in range(4):
                await h.execute_update(
                    ClusterWorkflow.submit_job, JobSubmission(request_id=f"r{i}", task=half)
                )
            while [job.status for job in (await query_status(h)).jobs] != [JobStatus.RUNNING] * 4:
                await asyncio.sleep(0.05)

            async def pending() -> list[str]:
                described = await h.describe()
                return [
                    activity.activity_type.name for activity in described.raw_description.pending_activities
                ]

            held = await pending()
            for _ in range(200):  # the watcher returns and is re-armed as it learns of each new job
                if held:
                    break
                await asyncio.sleep(0.05)
                held = await pending()
            assert held == ["watch_jobs"]
            cloud.released.update(f"job-{i}" for i in range(1, 5))
            while [job.status for job in (await query_status(h)).jobs] != [JobStatus.SUCCEEDED] * 4:
                await asyncio.sleep(0.05)
            for _ in range(200):  # no job left: the watcher is not re-armed
                if not await pending():
                    break
                await asyncio.sleep(0.05)
            assert not await pending()

    run(scenario())


def test_a_job_killed_outside_skyhop_asks_the_provider_about_its_node() -> None:
    """A node being removed stops its jobs first: the job's CANCELLED is the node going, not a cancel."""

    async def scenario() -> None:
        cloud = FakeCloud()
        cloud.hold_jobs = True
        async with time_skipping() as env, running_cluster(env.client, up_record("k"), cloud) as h:
            await h.execute_update(
                ClusterWorkflow.submit_job, JobSubmission(request_id="r", task=Task(run="x"))
            )
            while (await query_status(h)).jobs[0].status != JobStatus.RUNNING:
                await asyncio.sleep(0.05)
            cloud.statuses = [NodeStatus.TERMINATED]
            cloud.outcomes["job-1"] = JobOutcome(status="CANCELLED", exit_code=-15, failed_rank=0)
            cloud.released.add("job-1")
            while not (record := await query_status(h)).jobs[0].status.done:
                await asyncio.sleep(0.05)
            assert record.jobs[0].status == JobStatus.FAILED
            assert "node 0 is TERMINATED" in (record.jobs[0].error or "")

    run(scenario())


def test_job_ends_reach_the_notified_workflow_once_across_continue_as_new() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        cloud.hold_jobs = True
        async with (
            time_skipping() as env,
            running_cluster(env.client, up_record("n", cpus=2), cloud, history_limit=40) as h,
            waiter_worker(env.client) as queue,
        ):
            first_run = (await h.describe()).run_id
            waiter = await env.client.start_workflow(
                SubmitAndWait.run,
                SubmitAndWaitInput(cluster_name="n", tasks=[], expect=6),
                id="w",
                task_queue=queue,
            )
            half = Task(run="sleep 1", resources=Resources(cpus="0.5"))
            for i in range(6):
                submission = JobSubmission(request_id=f"r{i}", task=half, notify="w")
                await h.execute_update(ClusterWorkflow.submit_job, submission)
            for i in range(1, 7):
                while (await h.describe()).run_id == first_run and i == 4:
                    await asyncio.sleep(0.05)  # half of them end in the next run
                cloud.released.add(f"job-{i}")
            heard = await waiter.result()
            assert sorted(e.job.job_id for e in heard) == list(range(1, 7))
            assert {e.job.status for e in heard} == {JobStatus.SUCCEEDED}

    run(scenario())


@pytest.mark.integration
def test_a_workflow_learns_each_end_once_across_worker_kills(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    address = temporal_server.address
    name = unique_cluster("ev")

    async def scenario() -> None:
        client = await client_for(address)
        async with waiter_worker(client) as queue:
            for round_ in range(ROUNDS):
                tasks = [
                    Task(
                        run=f"sleep {3 + rank}; exit {10 * round_ + rank + 1}", resources=Resources(cpus=HALF)
                    )
                    for rank in range(2)
                ]
                waiter = await client.start_workflow(
                    SubmitAndWait.run,
                    SubmitAndWaitInput(cluster_name=name, tasks=tasks),
                    id=f"waiter-{uuid.uuid4().hex[:8]}",
                    task_queue=queue,
                )
                await asyncio.to_thread(
                    wait_for, lambda r=round_: _started(address, name, 2 * r, 2), 60, f"round {round_}: jobs"
                )
                live_worker.kill9()
                live_worker.start()
                try:
                    ended = await asyncio.wait_for(waiter.result(), 120)
                except TimeoutError:
                    cluster = client.get_workflow_handle(cluster_workflow_id(name))
                    pending = (await cluster.describe()).raw_description.pending_activities
                    jobs = [(j.job_id, j.status, j.exit_code) for j in current_record(address, name).jobs]
                    raise AssertionError(f"round {round_}: {jobs}; pending {pending}") from None
                codes = sorted((e.job.exit_code, e.job.status) for e in ended)
                assert codes == [(10 * round_ + r, JobStatus.FAILED) for r in (1, 2)], f"round {round_}"
                assert len({e.job.job_id for e in ended}) == 2
            assert await _signals_sent(client, name) == 2 * ROUNDS  # exactly once each, in history

    with cluster_up(address, name, Task()):
        run(scenario())


def test_a_watcher_that_first_asks_a_node_after_it_went_away_learns_it_is_gone(tmp_path: Path) -> None:
    """A watcher armed while a job was being started (``running`` false: a missing record is not a
    loss yet) may ask its node for the first time only after the node was removed. Before, it then
    waited for the record forever (the flaky ``test_a_workflow_learns_that_its_node_is_gone``)."""
    with enabled_sim(tmp_path):
        provider = get_provider("sim")
        request = ProvisionRequest(
            cluster_name=unique_cluster("wgone"), offering=provider.offerings()[0], num_nodes=2
        )
        handle = run(provider.launch(request))
        SimCloud().terminate([handle.nodes[1].instance_id])
        jobs = [WatchedJob(job_id=2, nodes=[1], running=False)]
        watch = ClusterWatch(WatchJobsInput(handle=handle, jobs=jobs, newer_than=2))
        result = run(watch.poll())
        assert list(result.ended) == [2] and result.ended[2].status == NodeJobStatus.FAILED
        assert result.ended[2].exit_code is None and result.ended[2].lost_rank is None  # asks the provider
        # One following only a job elsewhere says the node is gone (it may hold a job it does not
        # follow yet), and a watcher armed after that report does not say so again.
        elsewhere = WatchJobsInput(handle=handle, jobs=[], newer_than=2)
        assert run(ClusterWatch(elsewhere).poll()).gone == [1]
        told = elsewhere.model_copy(update={"gone": [1]})
        assert run(ClusterWatch(told).poll()) == WatchJobsResult()


@pytest.mark.integration
def test_a_workflow_learns_that_its_node_is_gone(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    address = temporal_server.address
    name = unique_cluster("evn")

    async def scenario() -> None:
        client = await client_for(address)
        async with waiter_worker(client) as queue:
            tasks = [Task(run="sleep 600", resources=Resources(cpus="2"))] * 2
            waiter = await client.start_workflow(
                SubmitAndWait.run,
                SubmitAndWaitInput(cluster_name=name, tasks=tasks),
                id=f"waiter-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
            )
            await asyncio.to_thread(
                wait_for,
                lambda: [j.status for j in current_record(address, name).jobs] == [JobStatus.RUNNING] * 2,
                60,
                "both jobs running",
            )
            record = await fetch_record(client, name)
            assert record.handle is not None
            SimCloud().terminate([record.handle.nodes[1].instance_id])  # behind skyhop's back
            on_node_1 = next(j.job_id for j in record.jobs if j.placement[0].node == 1)
            await asyncio.to_thread(
                wait_for,
                lambda: any(j.status.done for j in current_record(address, name).jobs),
                60,
                "the job on node 1 to end",
            )
            cluster = client.get_workflow_handle(cluster_workflow_id(name))
            await cluster.execute_update("cancel", CancelRequest(all=True), result_type=CancelResult)
            heard = await asyncio.wait_for(waiter.result(), 60)
            lost = next(e for e in heard if e.job.job_id == on_node_1)
            why = f"{lost.job.status} {lost.job.error!r}; {(await fetch_record(client, name)).degraded!r}"
            assert lost.lost_node == 1 and lost.job.status == JobStatus.FAILED, why
            assert "node 1 is TERMINATED" in (lost.job.error or "")
            other = next(e for e in heard if e.job.job_id != on_node_1)
            assert other.lost_node is None and other.job.status == JobStatus.CANCELLED

    with (
        enabled_sim(tmp_path),
        cluster_up(address, name, Task(num_nodes=2, resources=Resources(infra="sim"))),
    ):
        run(scenario())
