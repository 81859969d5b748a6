"""``--retry-until-up``: the search restarts after a durable, backing-off timer (time-skipping server)."""

from __future__ import annotations

import time
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from skyhop.contract import LAUNCH_WORKFLOW, SEARCH_ATTRIBUTES, WORKFLOW_QUEUE, cluster_workflow_id
from skyhop.contract.clusters import LaunchProgress, LaunchRequest, LaunchResult
from skyhop.providers.sim import SimCloud
from skyhop.spec import Resources, Task
from skyhop.worker import build_workers
from skyhop.workflows.failover import RETRY_FIRST
from tests.conftest import run
from tests.providers.sim_support import write_plan

TEST_SERVER = str(Path(__import__("sys").executable).parent / "temporal-test-server")


def test_every_zone_full_once_then_the_search_restarts_after_the_backoff_timer(sim_catalog: Path) -> None:
    zones = ["us-east-2a", "us-east-2b", "us-east-2c"]
    write_plan(sim_catalog, [{"zone": zone, "error": "capacity", "attempts": 1} for zone in zones])

    async def scenario() -> None:
        env = await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=TEST_SERVER, data_converter=pydantic_data_converter
        )
        try:
            await env.client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=env.client.namespace,
                    search_attributes={
                        n: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for n in SEARCH_ATTRIBUTES
                    },
                )
            )
            workers = build_workers(env.client)
            for worker in workers:
                await worker.__aenter__()
            try:
                began, wall = await env.get_current_time(), time.monotonic()
                request = LaunchRequest(
                    cluster_name="retry",
                    task=Task(resources=Resources(infra="sim/us-east-2")),
                    retry_until_up=True,
                )
                result = await env.client.execute_workflow(
                    LAUNCH_WORKFLOW,
                    request,
                    id="launch:retry",
                    task_queue=WORKFLOW_QUEUE,
                    result_type=LaunchResult,
                )
                skipped = (await env.get_current_time()) - began
                progress = await env.client.get_workflow_handle("launch:retry").query(
                    "progress", result_type=LaunchProgress
                )
                assert result.handle.offering.zone == "us-east-2a"
                assert [a.zone for a in progress.attempts] == zones
                assert progress.attempts[-1].next_location == "sim/us-east-2/us-east-2a"
                assert skipped >= RETRY_FIRST and time.monotonic() - wall < RETRY_FIRST.total_seconds()
                assert len(SimCloud().describe("retry")) == 1
                await env.client.get_workflow_handle(cluster_workflow_id("retry")).execute_update("down")
                assert SimCloud().describe("retry") == []
            finally:
                for worker in workers:
                    await worker.shutdown()
        finally:
            await env.shutdown()

    run(scenario())
