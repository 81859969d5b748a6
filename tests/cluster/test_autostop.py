"""Autostop as a durable timer, on Temporal's time-skipping test server (hours pass in milliseconds)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from skyhop.contract import ClusterStatus
from skyhop.contract.clusters import AutostopRequest, ClusterRecord, JobRecord, JobSubmission, StartRequest
from skyhop.spec import Task
from skyhop.workflows.cluster import ClusterWorkflow
from tests.cluster.fakes import FakeCloud, register_search_attributes, running_cluster, serving, up_record
from tests.conftest import run
from tests.helpers import until_true

TEST_SERVER = str(Path(sys.executable).parent / "temporal-test-server")

Handle = WorkflowHandle[ClusterWorkflow, ClusterRecord]


@asynccontextmanager
async def time_skipping() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=TEST_SERVER
    ) as env:
        await register_search_attributes(env.client)
        yield env


async def state(handle: Handle) -> ClusterStatus:
    record = await handle.query(ClusterWorkflow.status)
    return record.status


async def submit(handle: Handle, request_id: str) -> JobRecord:
    return await handle.execute_update(
        ClusterWorkflow.submit_job, JobSubmission(request_id=request_id, task=Task(run="true"))
    )


def test_an_idle_cluster_stops_after_its_idle_minutes() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        async with (
            time_skipping() as env,
            running_cluster(env.client, up_record("idle", idle_minutes=10), cloud) as h,
        ):
            await env.sleep(timedelta(minutes=9))
            assert await state(h) == ClusterStatus.UP
            await env.sleep(timedelta(minutes=2))
            assert await state(h) == ClusterStatus.STOPPED
            assert cloud.calls.count("stop_cluster") == 1
            await env.sleep(timedelta(hours=5))
            assert cloud.calls.count("stop_cluster") == 1

    run(scenario())


def test_a_job_resets_the_idle_clock() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        async with (
            time_skipping() as env,
            running_cluster(env.client, up_record("reset", idle_minutes=10), cloud) as h,
        ):
            await env.sleep(timedelta(minutes=8))
            job = await submit(h, "job-at-8m")
            # The job ended at once; the idle clock restarted then, so minute 10 passes quietly.
            await env.sleep(timedelta(minutes=9))
            record = await h.query(ClusterWorkflow.status)
            assert record.status == ClusterStatus.UP
            assert record.jobs[0].job_id == job.job_id and record.jobs[0].status.done
            assert record.idle_since is not None and record.autostop_at == record.idle_since + 600
            await env.sleep(timedelta(minutes=2))
            assert await state(h) == ClusterStatus.STOPPED
            assert cloud.calls.count("stop_cluster") == 1

    run(scenario())


def test_autostop_down_tears_the_cluster_down_and_ends_the_workflow() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        record = up_record("down", idle_minutes=5, down=True)
        async with time_skipping() as env, running_cluster(env.client, record, cloud) as h:
            final = await h.result()  # waiting on the result lets the server skip time
            assert final.status == ClusterStatus.TERMINATED
            assert cloud.calls.count("terminate") == 1 and "stop_cluster" not in cloud.calls

    run(scenario())


def test_cancelling_autostop_keeps_the_cluster_up_and_setting_it_again_restarts_the_clock() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        async with (
            time_skipping() as env,
            running_cluster(env.client, up_record("cancel", idle_minutes=10), cloud) as h,
        ):
            await env.sleep(timedelta(minutes=5))
            await h.execute_update(ClusterWorkflow.set_autostop, AutostopRequest(idle_minutes=None))
            await env.sleep(timedelta(hours=3))
            assert await state(h) == ClusterStatus.UP
            await h.execute_update(ClusterWorkflow.set_autostop, AutostopRequest(idle_minutes=20, down=False))
            await env.sleep(timedelta(minutes=19))
            assert await state(h) == ClusterStatus.UP
            await env.sleep(timedelta(minutes=2))
            assert await state(h) == ClusterStatus.STOPPED
            assert "terminate" not in cloud.calls

    run(scenario())


def test_autostop_fires_when_no_worker_was_up_at_the_deadline() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        async with time_skipping() as env:
            async with running_cluster(env.client, up_record("durable", idle_minutes=10), cloud) as h:
                assert await state(h) == ClusterStatus.UP
                deadline = (await h.query(ClusterWorkflow.status)).autostop_at
            # Every worker is gone when the timer comes due: the server fires it and keeps the task
            # (the time-skipping server then holds its clock until a worker takes that task).
            skipping = asyncio.create_task(env.sleep(timedelta(minutes=30)))
            assert deadline is not None

            async def past_deadline() -> bool:
                # A skip begins when the server gets to it, which on a busy machine takes seconds.
                return (await env.get_current_time()).timestamp() >= deadline

            await until_true(past_deadline, "the test server's clock to pass the autostop deadline")
            assert "stop_cluster" not in cloud.calls
            async with serving(env.client, cloud):
                await skipping
                assert await state(h) == ClusterStatus.STOPPED
                assert cloud.calls.count("stop_cluster") == 1

    run(scenario())


def test_where_the_provider_cannot_stop_start_recreates_the_nodes_and_sets_them_up_again() -> None:
    async def scenario() -> None:
        cloud = FakeCloud()
        cloud.can_stop = False
        launched = Task(
            workdir="/src/project", setup="pip install -r requirements.txt", run="python train.py"
        )
        record = up_record("nostop", idle_minutes=10)
        async with (
            time_skipping() as env,
            running_cluster(env.client, record, cloud, setup_task=launched) as h,
        ):
            await env.sleep(timedelta(minutes=11))
            stopped = await h.query(ClusterWorkflow.status)
            assert stopped.status == ClusterStatus.STOPPED and not stopped.stop_kept_nodes
            started = await h.execute_update(ClusterWorkflow.start, StartRequest())
            assert started.status == ClusterStatus.UP and started.stop_kept_nodes
            assert started.idle_minutes is None  # a start without -i has no autostop
            tail = cloud.calls[cloud.calls.index("stop_cluster") :]
            assert tail == [
                "stop_cluster",
                "start_cluster recreate",
                "sync_workdir /src/project",
                "run_setup pip install -r requirements.txt",
            ]

    run(scenario())
