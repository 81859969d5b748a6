"""A cluster whose workflow is stuck (its task fails on every attempt) stays visible and removable.

The workflow is made unreplayable the way a bad deploy would: its first task runs under a
different workflow definition of the same name, then the real one fails to replay it
(non-determinism). Nothing of skyhop can run in it any more, so the CLI must find its nodes by tag.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.worker import Worker

from skyhop.cli.failures import stuck_reason
from skyhop.contract import CLUSTER_WORKFLOW, ClusterStatus, cluster_workflow_id
from skyhop.contract.clusters import ClaimRequest, ClusterInput, ClusterRecord
from skyhop.contract.search import cluster_search_attributes
from skyhop.providers.base import ProvisionRequest
from skyhop.providers.sim import SimCloud
from skyhop.providers.sim.provider import SimProvider
from skyhop.workflows.cluster import ClusterWorkflow
from tests.conftest import skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for, unique_cluster
from tests.providers.sim_support import enabled_sim

pytestmark = pytest.mark.integration


@workflow.defn(name=CLUSTER_WORKFLOW, sandboxed=False)
class _OtherDefinition:
    """Another code's ``ClusterWorkflow``: its first task only starts a timer."""

    @workflow.run
    async def run(self, input: ClusterInput) -> None:
        await workflow.sleep(timedelta(days=1))


async def _until(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def _stuck_cluster(client: Client, name: str) -> WorkflowHandle[object, object]:
    """A cluster with two live sim nodes whose workflow fails every task with a non-determinism error."""
    provider = SimProvider()
    handle = await provider.launch(
        ProvisionRequest(cluster_name=name, offering=provider.offerings()[0], num_nodes=2)
    )
    record = ClusterRecord(name=name, status=ClusterStatus.UP, handle=handle, ever_up=True)
    queue = f"broken-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[_OtherDefinition]):
        wf = await client.start_workflow(
            CLUSTER_WORKFLOW,
            ClusterInput(record=record),
            id=cluster_workflow_id(name),
            task_queue=queue,
            search_attributes=cluster_search_attributes(name, "tester"),
        )

        async def first_task_done() -> bool:
            events = [e async for e in wf.fetch_history_events()]
            return any(e.HasField("timer_started_event_attributes") for e in events)

        await _until(first_task_done, "the other definition's first task")
    async with Worker(client, task_queue=queue, workflows=[ClusterWorkflow], max_cached_workflows=0):
        await wf.signal("claim", ClaimRequest(launch_id="launch:nobody"))  # a new task: replay fails

        async def stuck() -> bool:
            return await stuck_reason(wf) is not None

        await _until(stuck, "the real definition to fail the replay")
    return wf


def test_a_stuck_cluster_is_broken_in_status_and_down_removes_its_nodes_and_workflow(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name = unique_cluster("broken")
    with enabled_sim(tmp_path):
        client = asyncio.run(client_for(temporal_server.address))
        wf = asyncio.run(_stuck_cluster(client, name))
        assert len(SimCloud().describe(name)) == 2

        status = skyhop("status", env=cli_env)
        assert status.returncode == 0, status.stderr
        row = next(line for line in status.stdout.splitlines() if line.startswith(name))
        assert " BROKEN " in row
        assert f"cluster {name} is BROKEN: its workflow task fails (" in status.stderr
        assert "Nondeterminism" in status.stderr and f"skyhop down {name}" in status.stderr

        queue = skyhop("queue", name, env=cli_env)
        assert queue.returncode == 1 and len(queue.stderr.strip().splitlines()) == 1, queue.stderr
        assert "BROKEN" in queue.stderr and "Traceback" not in queue.stderr

        exec_ = skyhop("exec", name, "echo never", env=cli_env)
        assert exec_.returncode == 1 and f"cluster {name} is BROKEN" in exec_.stderr, exec_.stderr
        refused = skyhop("stop", name, "-y", env=cli_env)
        assert refused.returncode == 1 and f"skyhop down {name}" in refused.stderr, refused.stderr

        down = skyhop("down", "-a", "-y", env=cli_env)
        assert down.returncode == 0, down.stderr
        assert f"Cluster {name} was BROKEN" in down.stderr and "removed 2 node(s) found by tag" in down.stderr
        assert "terminated its workflow" in down.stderr
        assert SimCloud().describe(name) == []
        description = asyncio.run(client_for(temporal_server.address)).get_workflow_handle(wf.id).describe()
        assert asyncio.run(description).status == WorkflowExecutionStatus.TERMINATED
        assert name not in skyhop("status", env=cli_env).stdout
