"""Waiting for capacity is a durable backoff timer, shown with its reason (time-skipping server)."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.managed_jobs import EndReason
from skyhop.spec import Resources, Task
from skyhop.worker import build_workers
from skyhop.workflows.failover import RETRY_FIRST
from tests.cluster.fakes import register_search_attributes
from tests.conftest import run
from tests.managed_jobs.support import alive, start_job, until_state
from tests.providers.sim_support import write_plan

TEST_SERVER = str(Path(sys.executable).parent / "temporal-test-server")
ZONES = ["us-east-2a", "us-east-2b", "us-east-2c"]
TASK = Task(run="echo up", resources=Resources(infra="sim/us-east-2"))


@asynccontextmanager
async def skipping_with_workers() -> AsyncIterator[tuple[WorkflowEnvironment, Client]]:
    """The time-skipping server with skyhop's workers in this process."""
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=TEST_SERVER
    ) as env:
        await register_search_attributes(env.client)
        workers = build_workers(env.client)
        for worker in workers:
            await worker.__aenter__()
        try:
            yield env, env.client
        finally:
            for worker in workers:
                await worker.shutdown()


def test_no_capacity_for_a_while_then_capacity(sim_catalog: Path) -> None:
    write_plan(sim_catalog, [{"zone": zone, "error": "capacity", "attempts": 2} for zone in ZONES])

    async def scenario() -> None:
        async with skipping_with_workers() as (env, client):
            with env.auto_time_skipping_disabled():
                handle = await start_job(client, [TASK])
                waiting = await until_state(
                    handle, lambda s: s.tasks[0].retry_at is not None, "the job to wait for capacity"
                )
            task = waiting.tasks[0]
            assert waiting.status == ManagedJobStatus.PENDING
            assert task.waiting is not None and task.waiting.startswith("no capacity: 3 attempts failed")
            assert "us-east-2c" in task.waiting and "InsufficientInstanceCapacity" in task.waiting
            began, wall = await env.get_current_time(), time.monotonic()
            final = await handle.result()
            assert (await env.get_current_time()) - began >= RETRY_FIRST * 3  # two backoff timers
            assert time.monotonic() - wall < RETRY_FIRST.total_seconds()
            assert final.status == ManagedJobStatus.SUCCEEDED
            assert final.tasks[0].waiting is None and final.tasks[0].recoveries == 0
            assert alive(final.tasks[0].cluster_name) == []

    run(scenario())


def test_max_searches_ends_the_job_failed_no_resource(sim_catalog: Path) -> None:
    write_plan(sim_catalog, [{"zone": zone, "error": "capacity"} for zone in ZONES])

    async def scenario() -> None:
        async with skipping_with_workers() as (_, client):
            final = await (await start_job(client, [TASK], max_searches=2)).result()
            assert final.status == ManagedJobStatus.FAILED_NO_RESOURCE and final.end is not None
            assert final.end.reason == EndReason.NO_RESOURCE
            assert "in 2 searches (max_searches)" in final.end.message
            assert "6 tried" in final.end.message and "us-east-2b" in final.end.message
            assert alive(final.tasks[0].cluster_name) == []

    run(scenario())


def test_a_task_no_offering_fits_ends_failed_prechecks(sim_catalog: Path) -> None:
    task = Task(run="true", resources=Resources(infra="sim", accelerators="H100:64"))

    async def scenario() -> None:
        async with skipping_with_workers() as (_, client):
            final = await (await start_job(client, [task])).result()
            assert final.status == ManagedJobStatus.FAILED_PRECHECKS and final.end is not None
            assert final.end.reason == EndReason.PRECHECKS and "H100" in final.end.message

    run(scenario())


def test_a_long_wait_continues_as_new_carrying_the_job(sim_catalog: Path) -> None:
    write_plan(sim_catalog, [{"zone": zone, "error": "capacity", "attempts": 4} for zone in ZONES])

    async def scenario() -> None:
        async with skipping_with_workers() as (_, client):
            handle = await start_job(client, [TASK], history_limit=40)
            first_run = (await handle.describe()).run_id
            final = await handle.result()
            assert final.status == ManagedJobStatus.SUCCEEDED
            assert [a.outcome for a in final.tasks[0].attempts] == ["succeeded"]
            assert (await handle.describe()).run_id != first_run
            assert alive(final.tasks[0].cluster_name) == []

    run(scenario())


def test_cancel_while_waiting_for_capacity_leaves_nothing(sim_catalog: Path) -> None:
    write_plan(sim_catalog, [{"zone": zone, "error": "capacity"} for zone in ZONES])

    async def scenario() -> None:
        async with skipping_with_workers() as (env, client):
            with env.auto_time_skipping_disabled():
                handle = await start_job(client, [TASK])
                await until_state(
                    handle,
                    lambda s: s.status == ManagedJobStatus.PENDING and s.tasks[0].retry_at is not None,
                    "the wait",
                )
                await handle.cancel()
                final = await handle.result()
            assert final.status == ManagedJobStatus.CANCELLED and final.end is not None
            assert final.end.reason == EndReason.CANCELLED
            assert alive(final.tasks[0].cluster_name) == []

    run(scenario())
