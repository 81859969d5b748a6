"""A launch that ends holding its cluster's lock without giving it back (terminated, timed out)
does not block the cluster: the cluster notices the holder has closed and takes the lock back.

Real dev server and worker; ``stop``, ``down`` and ``exec`` through the ``skyhop`` CLI.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from skyhop.contract import LAUNCH_WORKFLOW, WORKFLOW_QUEUE, ClusterStatus
from skyhop.contract.clusters import LaunchRequest, LaunchResult
from skyhop.spec import Resources, Task
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, current_record, launch, record, unique_cluster

pytestmark = pytest.mark.integration

_LOCAL = Resources(infra="local")
_HOLDS_FOR_GOOD = Task(setup="sleep 600", run="echo never", resources=_LOCAL)
"""A launch of this task on an UP cluster holds the cluster's lock through a ten-minute setup."""


async def _holding_launch(
    client: Client, cluster: str, execution_timeout: timedelta | None = None
) -> WorkflowHandle[Any, LaunchResult]:
    """An UP cluster, and a launch that holds its lock (in setup) once this returns."""
    await launch(client, cluster, Task(resources=_LOCAL))
    handle: WorkflowHandle[Any, LaunchResult] = await client.start_workflow(
        LAUNCH_WORKFLOW,
        LaunchRequest(cluster_name=cluster, task=_HOLDS_FOR_GOOD, user="tester"),
        id=f"launch:{cluster}:{uuid.uuid4().hex[:8]}",
        task_queue=WORKFLOW_QUEUE,
        result_type=LaunchResult,
        execution_timeout=execution_timeout,
    )
    deadline = asyncio.get_running_loop().time() + 90
    while (await record(client, cluster)).holder is None:
        assert asyncio.get_running_loop().time() < deadline, "the launch never held the cluster"
        await asyncio.sleep(0.1)
    return handle


def test_a_launch_terminated_while_holding_the_lock_blocks_neither_stop_nor_down(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    cluster = unique_cluster("term")

    async def terminate_the_holder() -> None:
        client = await client_for(temporal_server.address)
        handle = await _holding_launch(client, cluster)
        await handle.terminate("a launch that runs no more code, not even its release")

    run(terminate_the_holder())
    stopped = skyhop("stop", "-y", cluster, env=cli_env, timeout=90)
    assert stopped.returncode == 0, stopped.stderr
    after_stop = current_record(temporal_server.address, cluster)
    assert after_stop.holder is None and after_stop.status == ClusterStatus.STOPPED
    gone = skyhop("down", "-y", cluster, env=cli_env, timeout=90)
    assert gone.returncode == 0, gone.stderr
    assert current_record(temporal_server.address, cluster).status == ClusterStatus.TERMINATED


def test_a_launch_that_times_out_holding_the_lock_leaves_the_cluster_usable(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    cluster = unique_cluster("tout")

    async def time_out_the_holder() -> None:
        client = await client_for(temporal_server.address)
        handle = await _holding_launch(client, cluster, execution_timeout=timedelta(seconds=20))
        deadline = asyncio.get_running_loop().time() + 90
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            assert asyncio.get_running_loop().time() < deadline, "the launch never timed out"
            await asyncio.sleep(0.5)
        assert (await handle.describe()).status == WorkflowExecutionStatus.TIMED_OUT

    run(time_out_the_holder())
    wait_for(lambda: current_record(temporal_server.address, cluster).holder is None, 60, "the lock back")
    after = current_record(temporal_server.address, cluster)
    assert after.status == ClusterStatus.UP and after.degraded is not None
    assert "ended without finishing" in after.degraded
    ran = skyhop("exec", cluster, "echo still usable", env=cli_env, timeout=90)
    assert ran.returncode == 0 and "still usable" in ran.stdout, ran.stderr
    gone = skyhop("down", "-y", cluster, env=cli_env, timeout=90)
    assert gone.returncode == 0, gone.stderr
