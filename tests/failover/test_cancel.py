"""Cancelling a launch, on a real dev server and worker: during failover and during setup.

A cancelled launch ends CANCELLED and leaves nothing it created: no instance, no cluster UP, no
job, no setup process. A cluster that existed before the launch stays up and usable.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle

from skyhop.cli.failures import asked_again
from skyhop.contract import ClusterStatus, JobStatus, setup_key
from skyhop.contract.clusters import LaunchProgress
from skyhop.providers.sim import SimCloud
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.failover.support import start_launch
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, down, launch, record, unique_cluster, until_job_done
from tests.providers.sim_support import write_plan

pytestmark = pytest.mark.integration

_TRIES = 7
# Where each try cancels: after this many failed attempts, this long into the next one.
_CANCEL_POINTS = [(1, 0.0), (1, 0.6), (2, 0.3), (2, 1.1), (3, 0.0), (3, 0.8), (4, 0.5)]


async def _progress(handle: WorkflowHandle[Any, Any]) -> LaunchProgress:
    progress: LaunchProgress = await asked_again(lambda: handle.query("progress", result_type=LaunchProgress))
    return progress


async def _until(what: str, check: Any, timeout: float = 90) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _ends_cancelled(handle: WorkflowHandle[Any, Any]) -> None:
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(handle.result(), 120)
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


def test_a_launch_cancelled_at_any_point_of_failover_ends_cancelled_with_nothing_left(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    # Two regions out of capacity and slow API calls: every try is cancelled mid-failover.
    faults = [{"region": region, "error": "capacity"} for region in ("us-east-1", "us-east-2")]

    async def one(index: int, after_attempts: int, into_s: float) -> None:
        write_plan(sim_catalog, faults, latency_s=0.5)
        cluster = unique_cluster(f"cx{index}")
        marker = tmp_path / f"ran-{index}"
        client = await client_for(temporal_server.address)
        handle = await start_launch(
            client, cluster, Task(run=f"touch {marker}", resources=Resources(infra="sim"))
        )

        async def failed_over() -> bool:
            return len((await _progress(handle)).attempts) >= after_attempts

        await _until(f"{after_attempts} failed attempts", failed_over)
        await asyncio.sleep(into_s)  # the point of the next attempt this try cancels at
        await handle.cancel()
        await _ends_cancelled(handle)
        assert SimCloud().describe(cluster) == [], f"try {index}: instances left"
        rec = await record(client, cluster)
        assert rec.status != ClusterStatus.UP and rec.jobs == [], f"try {index}: {rec.status}"
        assert not marker.exists(), f"try {index}: the job ran"

    async def scenario() -> None:
        for index, (after, into) in enumerate(_CANCEL_POINTS[:_TRIES]):
            await one(index, after, into)

    run(scenario())


def _setup_state(progress: LaunchProgress, launch_id: str) -> dict[str, Any] | None:
    if progress.handle is None or progress.stage != "setup":
        return None
    state_file = Path(progress.handle.nodes[0].runtime_dir) / "jobs" / setup_key(launch_id) / "state.json"
    try:
        state: dict[str, Any] = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None
    return state if state.get("status") == "RUNNING" and "pid" in state else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _cancel_during_setup(handle: WorkflowHandle[Any, Any]) -> int:
    """Cancel once setup runs; the setup process's pid."""
    state: dict[str, Any] | None = None

    async def running() -> bool:
        nonlocal state
        state = _setup_state(await _progress(handle), handle.id)
        return state is not None

    await _until("setup to run", running)
    assert state is not None
    await handle.cancel()
    await _ends_cancelled(handle)
    return int(state["pid"])


def _setup_task(marker: Path) -> Task:
    return Task(setup=f"sleep 300; touch {marker}", run="echo ran", resources=Resources(infra="local"))


def test_cancel_during_setup_of_a_new_cluster_stops_setup_and_removes_the_cluster(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster = unique_cluster("cset")
    marker = tmp_path / "setup-done"

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_launch(client, cluster, _setup_task(marker))
        node_dir = None

        async def provisioned() -> bool:
            nonlocal node_dir
            progress = await _progress(handle)
            node_dir = progress.handle.nodes[0].runtime_dir if progress.handle else None
            return node_dir is not None

        await _until("the node", provisioned)
        pid = await _cancel_during_setup(handle)
        await asyncio.to_thread(wait_for, lambda: not _alive(pid), 30, "the setup process to end")
        rec = await record(client, cluster)
        assert rec.status == ClusterStatus.TERMINATED
        assert node_dir is not None and not Path(node_dir).exists()
        assert not marker.exists()

    run(scenario())


def test_cancel_during_setup_on_an_existing_cluster_stops_setup_and_keeps_the_cluster(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster = unique_cluster("cexist")
    marker = tmp_path / "setup-done"

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        await launch(client, cluster, Task(resources=Resources(infra="local")))
        handle = await start_launch(client, cluster, _setup_task(marker))
        pid = await _cancel_during_setup(handle)
        await asyncio.to_thread(wait_for, lambda: not _alive(pid), 30, "the setup process to end")
        assert "was left as it was" in ((await _progress(handle)).error or "")
        rec = await record(client, cluster)
        assert rec.status == ClusterStatus.UP and rec.holder is None
        # Still usable: a job runs on it.
        await launch(client, cluster, Task(run="echo still here", resources=Resources(infra="local")))
        await until_job_done(temporal_server.address, cluster, 60, "the job")
        assert (await record(client, cluster)).jobs[-1].status == JobStatus.SUCCEEDED
        assert not marker.exists()
        await down(client, cluster)

    run(scenario())
