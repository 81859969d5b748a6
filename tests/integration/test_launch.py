"""LaunchWorkflow and ClusterWorkflow on a real dev server and a real worker process, local provider."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from skyhop.cli.embedded import temporal_binary
from skyhop.contract import ClusterStatus, JobStatus
from skyhop.providers.home import skyhop_home
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import (
    client_for,
    decrypted,
    down,
    launch,
    payload_mac,
    record,
    unique_cluster,
    until_job_done,
)

pytestmark = pytest.mark.integration


def _failure_chain(error: BaseException | None) -> str:
    """Every message along a Temporal failure's chain of causes."""
    messages = []
    while error is not None:
        messages.append(str(error))
        error = getattr(error, "cause", None)
    return " <- ".join(messages)


def test_launch_runs_setup_and_job_with_rank_variables(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster = unique_cluster()
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "data.txt").write_text("from the workdir\n")
    task = Task(
        workdir=str(workdir),
        num_nodes=2,
        setup="echo setup > setup-ran",
        run='cat data.txt setup-ran; echo "rank=$SKYHOP_NODE_RANK n=$SKYPILOT_NUM_NODES id=$SKYHOP_TASK_ID"',
        envs={"GREETING": "hi"},
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        result = await launch(client, cluster, task)
        assert result.provisioned and result.job_id == 1
        assert len(result.handle.nodes) == 2
        await until_job_done(temporal_server.address, cluster, 30, "job 1")
        rec = await record(client, cluster)
        assert rec.status == ClusterStatus.UP
        assert rec.jobs[0].status == JobStatus.SUCCEEDED
        for node in result.handle.nodes:
            log = (Path(node.runtime_dir) / "jobs" / "job-1" / "run.log").read_text()
            assert "from the workdir" in log and "setup" in log
            assert f"rank={node.rank} n=2 id=skyhop-" in log
            assert log.rstrip().endswith(f"_{cluster}_1")
        final = await down(client, cluster)
        assert final.status == ClusterStatus.TERMINATED
        assert not (skyhop_home() / "clusters" / cluster).exists()

    run(scenario())


def test_concurrent_launches_of_one_cluster_provision_once(
    temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    cluster = unique_cluster()
    task = Task(setup="echo $$ >> ../../provisions.log", run="echo job")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        first, second = await asyncio.gather(launch(client, cluster, task), launch(client, cluster, task))
        assert sorted([first.provisioned, second.provisioned]) == [False, True]
        assert sorted([first.job_id, second.job_id]) == [1, 2]
        rec = await record(client, cluster)
        assert len(rec.jobs) == 2 and rec.next_job_id == 3
        # Setup ran once per launch; provisioning happened once (one set of node folders).
        nodes = list((skyhop_home() / "clusters" / cluster).glob("node-*"))
        assert len(nodes) == 1
        await down(client, cluster)

    run(scenario())


def test_infeasible_request_fails_at_optimize_and_leaves_nothing(
    temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    from temporalio.client import WorkflowFailureError

    cluster = unique_cluster()
    task = Task(run="echo never", resources=Resources(cpus="512+"))

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        with pytest.raises(WorkflowFailureError) as failure:
            await launch(client, cluster, task)
        assert "no offering satisfies 512+ CPU" in _failure_chain(failure.value)
        assert not (skyhop_home() / "clusters" / cluster).exists()
        rec = await record(client, cluster)
        assert rec.status == ClusterStatus.TERMINATED

    run(scenario())


def test_resources_autostop_is_set_on_the_cluster(
    temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    cluster = unique_cluster()
    task = Task(run="true", resources=Resources(autostop={"idle_minutes": 7, "down": True}))  # type: ignore[arg-type]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        await launch(client, cluster, task)
        rec = await record(client, cluster)
        assert (rec.idle_minutes, rec.autostop_down) == (7, True)
        await down(client, cluster)

    run(scenario())


def test_temporal_cli_starts_a_launch_with_signed_json_input(
    temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    """The contract README documents: any Temporal client can start a launch with JSON it signs."""
    cluster = unique_cluster()
    request = {"cluster_name": cluster, "task": {"run": "echo from-json", "resources": {"cpus": "1+"}}}
    data = json.dumps(request)
    out = subprocess.run(
        [
            temporal_binary(), "workflow", "execute", "--address", temporal_server.address,
            "--type", "LaunchWorkflow", "--task-queue", "skyhop-workflows",
            "--workflow-id", f"launch:{cluster}:json", "--input", data, "-o", "json",
            "--input-meta", f"skyhop-mac={payload_mac(data)}",
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    # The result is encrypted, so the CLI prints the payload as is (data in base64).
    assert decrypted(json.loads(out.stdout)["result"])["job_id"] == 1

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        await until_job_done(temporal_server.address, cluster, 30, "job 1")
        rec = await record(client, cluster)
        assert rec.jobs[0].status == JobStatus.SUCCEEDED
        await down(client, cluster)

    run(scenario())


def test_worker_killed_during_setup_the_launch_completes_and_runs_once(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster = unique_cluster()
    marks = tmp_path / "marks"
    task = Task(setup=f"echo setup >> {marks}; sleep 3", run=f"echo run >> {marks}")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        launching = asyncio.create_task(launch(client, cluster, task, workflow_id=f"launch:{cluster}:kill"))
        await asyncio.to_thread(wait_for, marks.exists, 30, "setup to start")
        live_worker.kill9()
        live_worker.start()
        result = await asyncio.wait_for(launching, 60)
        await until_job_done(temporal_server.address, cluster, 30, "job")
        assert marks.read_text().splitlines() == ["setup", "run"]
        assert result.job_id == 1
        assert len(list((skyhop_home() / "clusters" / cluster).glob("node-*"))) == 1
        await down(client, cluster)

    run(scenario())


def test_worker_killed_during_job_the_job_runs_once_and_is_recorded(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    cluster = unique_cluster()
    marks = tmp_path / "marks"
    task = Task(run=f"echo run >> {marks}; sleep 4; echo end >> {marks}")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        await launch(client, cluster, task)
        await asyncio.to_thread(wait_for, marks.exists, 30, "the job to start")
        live_worker.kill9()
        live_worker.start()
        await until_job_done(temporal_server.address, cluster, 60, "job")
        rec = await record(client, cluster)
        assert rec.jobs[0].status == JobStatus.SUCCEEDED
        assert marks.read_text().splitlines() == ["run", "end"]
        await down(client, cluster)

    run(scenario())


def test_dev_server_restart_mid_launch_resumes(tmp_path: Path) -> None:
    """Stop and restart the server on the same SQLite file while setup runs: the launch finishes."""
    server = DevServer(tmp_path)
    server.start()
    worker = WorkerProcess(server.address, tmp_path)
    worker.start()
    cluster = unique_cluster()
    marks = tmp_path / "marks"
    task = Task(setup=f"echo setup >> {marks}; sleep 3", run=f"echo run >> {marks}")
    workflow_id = f"launch:{cluster}:{uuid.uuid4().hex[:6]}"
    try:

        async def start() -> None:
            from skyhop.contract import LAUNCH_WORKFLOW, WORKFLOW_QUEUE
            from skyhop.contract.clusters import LaunchRequest

            client = await client_for(server.address)
            await client.start_workflow(
                LAUNCH_WORKFLOW,
                LaunchRequest(cluster_name=cluster, task=task),
                id=workflow_id,
                task_queue=WORKFLOW_QUEUE,
            )

        run(start())
        wait_for(marks.exists, 30, "setup to start")
        server.stop()
        server.start()

        async def finish() -> None:
            client = await client_for(server.address)
            result = await client.get_workflow_handle(workflow_id).result()
            assert result["job_id"] == 1
            await until_job_done(server.address, cluster, 60, "job")
            assert marks.read_text().splitlines() == ["setup", "run"]
            await down(client, cluster)

        run(finish())
    finally:
        worker.stop()
        server.stop()
