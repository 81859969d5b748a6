"""Failover on the sim cloud through a real dev server and worker: from the CLI, under kill -9, on cancel."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from temporalio.client import WorkflowFailureError

from skyhop.cli.failures import asked_again
from skyhop.contract.clusters import LaunchProgress
from skyhop.providers.sim import SimCloud
from skyhop.spec import Resources, Task
from tests.conftest import run, skyhop
from tests.failover.support import start_launch
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, down, unique_cluster
from tests.providers.sim_support import ZONES, write_plan

pytestmark = pytest.mark.integration


def _instances(cluster: str) -> list[dict[str, object]]:
    return SimCloud().describe(cluster)


def _task_file(
    tmp_path: Path, infra: str, num_nodes: int, run_cmd: str | None = "echo hello from $SKYHOP_NODE_RANK"
) -> Path:
    body: dict[str, object] = {"resources": {"infra": infra}, "num_nodes": num_nodes}
    if run_cmd:
        body["run"] = run_cmd
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_cli_launch_fails_over_past_full_zones_and_runs_the_job(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    sim_catalog: Path,
    tmp_path: Path,
) -> None:
    full = [zone for _, zone in ZONES[:3]]
    write_plan(sim_catalog, [{"zone": zone, "error": "capacity"} for zone in full])
    cluster = unique_cluster("fo")
    done = skyhop("launch", "-y", "-c", cluster, str(_task_file(tmp_path, "sim", 2)), env=cli_env)
    assert done.returncode == 0, done.stderr
    assert "sim us-east-1a: capacity (InsufficientInstanceCapacity) — trying us-east-1b" in done.stderr
    assert "sim us-east-1c: capacity (InsufficientInstanceCapacity) — trying us-east-1d" in done.stderr
    assert "hello from 0" in done.stdout
    instances = _instances(cluster)
    assert len(instances) == 2 and {i["zone"] for i in instances} == {ZONES[3][1]}
    gone = skyhop("down", "-y", cluster, env=cli_env)
    assert gone.returncode == 0, gone.stderr
    assert _instances(cluster) == []


def test_cli_exhausted_failover_shows_what_was_tried_and_leaves_nothing(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    sim_catalog: Path,
    tmp_path: Path,
) -> None:
    region = "us-east-2"
    write_plan(
        sim_catalog,
        [
            {"zone": "us-east-2a", "error": "capacity", "after_nodes": 1},
            {"zone": "us-east-2b", "error": "capacity", "code": "InsufficientInstanceCapacity"},
            {"zone": "us-east-2c", "error": "quota", "code": "VcpuLimitExceeded"},
        ],
    )
    cluster = unique_cluster("fo")
    done = skyhop("launch", "-y", "-c", cluster, str(_task_file(tmp_path, f"sim/{region}", 2)), env=cli_env)
    assert done.returncode == 1
    assert "no candidate could be provisioned (3 tried)" in done.stderr
    assert "sim us-east-2a  m6i.large  capacity (InsufficientInstanceCapacity)" in done.stderr
    assert "sim us-east-2c  m6i.large  quota (VcpuLimitExceeded)" in done.stderr
    assert "Traceback" not in done.stderr
    assert _instances(cluster) == []


def test_worker_killed_mid_attempt_the_launch_completes_with_exactly_the_nodes_asked_for(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path
) -> None:
    # Every sim API call takes 1.5 s, so the attempt is still waiting for its nodes when they exist.
    write_plan(sim_catalog, [{"zone": ZONES[0][1], "error": "capacity"}], latency_s=1.5)
    cluster = unique_cluster("kill")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_launch(client, cluster, Task(num_nodes=3, resources=Resources(infra="sim")))
        await asyncio.to_thread(wait_for, lambda: len(_instances(cluster)) == 3, 60, "3 sim instances")
        live_worker.kill9()
        live_worker.start()
        result = await handle.result()
        assert len(result.handle.nodes) == 3 and result.handle.offering.zone == ZONES[1][1]
        assert len(_instances(cluster)) == 3
        await down(client, cluster)
        assert _instances(cluster) == []

    run(scenario())


def test_cancelling_a_launch_mid_failover_leaves_no_instance(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path
) -> None:
    # Every zone half-fails: each attempt creates one node, then runs out of capacity.
    write_plan(sim_catalog, [{"region": "us-east-1", "error": "capacity", "after_nodes": 1}], latency_s=0.3)
    cluster = unique_cluster("cancel")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_launch(
            client, cluster, Task(num_nodes=2, resources=Resources(infra="sim/us-east-1"))
        )

        async def failed_over() -> bool:
            progress = await asked_again(lambda: handle.query("progress", result_type=LaunchProgress))
            return len(progress.attempts) >= 2 and progress.stage == "provision"

        while not await failed_over():
            await asyncio.sleep(0.1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert _instances(cluster) == []

    run(scenario())
