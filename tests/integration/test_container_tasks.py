"""``image_id: docker:IMAGE`` on a real dev server and worker process (local provider): setup and run
execute in the container, and a node with neither docker nor podman fails the launch at setup.

Real podman cannot start a container in this sandbox (crun's setrlimit is denied), so the node's
PATH holds a stand-in (``tests.helpers.fake_container_runtime``) or nothing at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError

from skyhop.contract import ErrorType, JobStatus
from skyhop.providers.runtime import node_runner
from skyhop.spec import task_from_dict
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess, fake_container_runtime
from tests.integration.support import (
    client_for,
    down,
    launch,
    launched,
    record,
    unique_cluster,
    until_job_done,
)

pytestmark = pytest.mark.integration


def test_setup_and_run_execute_in_the_tasks_container_with_its_workdir_and_envs(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    calls = fake_container_runtime(tmp_path / "bin")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print(1)\n")
    cluster = unique_cluster()
    task = task_from_dict(
        {
            "workdir": str(tmp_path / "code"),
            "resources": {"infra": "local", "image_id": "docker:ubuntu:20.04"},
            "envs": {"PATH": str(tmp_path / "bin"), "LR": "0.1"},
            "setup": 'echo "setup in $CONTAINER_IMAGE"',
            "run": 'echo "run in $CONTAINER_IMAGE lr=$LR" *',
        },
        tmp_path,
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        async with launched(client, cluster, task) as result:
            await until_job_done(temporal_server.address, cluster, 60, "job 1")
            assert (await record(client, cluster)).jobs[0].status == JobStatus.SUCCEEDED
            jobs = Path(result.handle.nodes[0].runtime_dir) / "jobs"
            kept = node_runner.node_image(result.handle.nodes[0].runtime_dir)
            assert (jobs / "job-1" / "run.log").read_text().split() == [
                "run",
                "in",
                kept,
                "lr=0.1",
                "train.py",
            ]
            made = [json.loads(line) for line in calls.read_text().splitlines()]
            assert [c[c.index("-c") - 1] for c in made if c[0] == "run"] == ["ubuntu:20.04", kept]
        # down removes the image the node's setup kept
        assert ["rmi", "-f", kept] in [json.loads(line) for line in calls.read_text().splitlines()]

    run(scenario())


def test_a_container_task_on_a_node_without_docker_or_podman_fails_at_setup_in_one_line(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    cluster = unique_cluster()
    task = task_from_dict(
        {
            "resources": {"infra": "local", "image_id": "docker:ubuntu:20.04"},
            "envs": {"PATH": str(tmp_path / "empty")},
            "run": "echo never",
        },
        tmp_path,
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        with pytest.raises(WorkflowFailureError) as failed:
            await launch(client, cluster, task)
        chain, error = [], failed.value.cause
        while error is not None:
            chain.append(f"{getattr(error, 'type', '')} {error}")
            error = getattr(error, "cause", None)
        message = next(item for item in chain if ErrorType.SETUP_FAILED.value in item)
        assert node_runner.no_runtime_error("ubuntu:20.04") in message and "\n" not in message, chain
        await down(client, cluster)

    run(scenario())
