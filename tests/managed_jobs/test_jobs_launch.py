"""``skyhop jobs launch`` from the CLI: ids, what a submitted job carries, and a job's whole life.

The submit tests hold before ``ManagedJobWorkflow`` exists in this worker (nothing needs the job
to run); the tests that follow a job to its end need it, and skip until it is there.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from skyhop.cli.job_ids import allocate_job_id
from skyhop.contract.job_index import MEMO_KEY, ManagedJobStatus, ManagedJobSummary, managed_job_workflow_id
from tests.conftest import REPO, run, skyhop
from tests.helpers import SKYHOP_CLI, DevServer, WorkerProcess, wait_for, with_signals
from tests.integration.support import client_for
from tests.managed_jobs.fakes import start_listed, user_env
from tests.managed_jobs.support import attempt, job_state

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

_SUBMITTED = re.compile(r"Managed job (\d+) \((.*)\) submitted\.")


def _submitted_id(stderr: str) -> int:
    found = _SUBMITTED.search(stderr)
    assert found is not None, stderr
    return int(found.group(1))


def _end(address: str, job_ids: list[int]) -> None:
    """Cancel the jobs (each removes its cluster)."""

    async def end() -> None:
        client = await client_for(address)
        for job_id in job_ids:
            handle = client.get_workflow_handle(managed_job_workflow_id(job_id))
            with contextlib.suppress(RPCError):
                await handle.cancel()

    run(end())


def test_concurrent_submits_get_consecutive_ids_and_start_a_listed_pending_job(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    env, user = user_env(cli_env)
    argv = ["jobs", "launch", "-y", "-d", "--infra", "local", "-n", "probe", "--cpus", "1+", "sleep 600"]
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: skyhop(*argv, env=env), range(3)))
    ids = []
    try:
        for result in results:
            assert result.returncode == 0, result.stderr
            ids.append(_submitted_id(result.stderr))
            assert f"skyhop jobs logs {ids[-1]} --follow" in result.stderr
        assert sorted(ids) == list(range(min(ids), min(ids) + 3))

        async def described() -> list[tuple[WorkflowExecutionStatus | None, ManagedJobSummary, str | None]]:
            client = await client_for(temporal_server.address)
            found = []
            for job_id in ids:
                description = await client.get_workflow_handle(managed_job_workflow_id(job_id)).describe()
                summary = await description.memo_value(MEMO_KEY, type_hint=ManagedJobSummary)
                found.append((description.status, summary, description.workflow_type))
            return found

        for (_, summary, workflow_type), job_id in zip(run(described()), ids, strict=True):
            assert workflow_type == "ManagedJobWorkflow"
            assert (summary.job_id, summary.name, summary.resources) == (job_id, "probe", "1x[1+ CPU]")
        wait_for(
            lambda: len(json.loads(skyhop("jobs", "queue", "--json", env=env).stdout)["items"]) == 3,
            60,
            "visibility to list the three jobs",
        )
        items = json.loads(skyhop("jobs", "queue", "--json", env=env).stdout)["items"]
        assert [item["job_id"] for item in items] == sorted(ids, reverse=True)
        assert {item["user"] for item in items} == {user}
    finally:
        _end(temporal_server.address, ids)


def test_bad_input_starts_nothing(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    env, _ = user_env(cli_env)
    task = tmp_path / "task.yaml"
    task.write_text("name: grp\nexecution: parallel\n---\nresources: {cpu: 4}\nrun: x\n")
    bad = skyhop("jobs", "launch", "-y", str(task), env=env)
    assert bad.returncode == 2, bad.stderr
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "Error: resources.cpu: unknown field (did you mean 'cpus'?)"
    )
    queue = skyhop("jobs", "queue", "--json", env=env)
    assert queue.returncode == 0 and json.loads(queue.stdout)["items"] == []


def test_an_id_an_earlier_job_had_is_never_reused(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    """As after the allocator was reset: the next id it hands out belongs to a job that ended."""
    env, user = user_env(cli_env)

    async def taken() -> int:
        client = await client_for(temporal_server.address)
        last = await allocate_job_id(client, f"probe-{uuid.uuid4().hex}")
        state = job_state(last + 1, [[attempt(1)]], ManagedJobStatus.SUCCEEDED)
        handle = await start_listed(client, state.model_copy(update={"user": user}))
        await handle.terminate("an earlier job, ended")
        return last + 1

    job_id = run(taken())
    launched = skyhop("jobs", "launch", "-y", "-d", "--infra", "local", "echo x", env=env)
    assert launched.returncode == 1, launched.stderr
    assert launched.stderr.strip() == (
        f"Error: job id {job_id} belongs to an earlier job: the id allocator (managed-job-ids) was reset; "
        "a new one must start above the highest id in: skyhop jobs queue -a"
    )


def test_a_job_runs_to_succeeded_and_its_output_is_in_jobs_logs(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    env, _ = user_env(cli_env)
    launched = skyhop(
        "jobs", "launch", "-y", "--infra", "local", "-n", "hello", "echo hello-managed", env=env, timeout=300
    )
    assert launched.returncode == 0, launched.stderr
    job_id = _submitted_id(launched.stderr)
    assert "hello-managed" in launched.stdout
    assert f"Managed job {job_id} (hello): SUCCEEDED" in launched.stderr
    logs = skyhop("jobs", "logs", str(job_id), env=env)
    assert logs.returncode == 0 and logs.stdout.splitlines() == ["hello-managed"], logs.stderr
    items = json.loads(skyhop("jobs", "queue", "--json", env=env).stdout)["items"]
    assert [(item["job_id"], item["status"]) for item in items] == [(job_id, "SUCCEEDED")]

    failed = skyhop("jobs", "launch", "-y", "--infra", "local", "exit 3", env=env, timeout=300)
    assert failed.returncode == 1, failed.stderr
    assert "FAILED" in failed.stderr and "Traceback" not in failed.stderr


def test_ctrl_c_detaches_and_the_job_runs_on_until_cancelled(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    env, _ = user_env(cli_env)
    proc = subprocess.Popen(
        with_signals(
            [SKYHOP_CLI, "jobs", "launch", "-y", "--infra", "local", "echo started; sleep 600"],
            default=(signal.SIGINT,),
        ),
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    job_id = _submitted_id(err)
    assert proc.returncode == 130 and f"skyhop jobs cancel {job_id}" in err and "Traceback" not in err

    def status() -> str:
        return str(json.loads(skyhop("jobs", "queue", "--json", env=env).stdout)["items"][0]["status"])

    assert status() == "RUNNING"
    cancel = skyhop("jobs", "cancel", str(job_id), env=env)
    assert cancel.returncode == 0 and f"Cancelling managed job(s) {job_id}:" in cancel.stderr
    wait_for(lambda: status() == "CANCELLED", 120, "the job to end CANCELLED")


def test_a_skypilot_job_group_ends_with_its_primary_task_and_queue_says_which(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """SkyPilot's job-group header, whole: the auxiliary server is stopped 1 s after the trainer ended."""
    env, _ = user_env(cli_env)
    group = tmp_path / "group.yaml"
    group.write_text(
        "name: rl\nexecution: parallel\nprimary_tasks: [trainer]\ntermination_delay: 1s\n"
        "inter_connection: true\nplacement: SAME_INFRA\n"
        f"---\nname: trainer\nresources: {{infra: local}}\n"
        f"run: while [ ! -e {tmp_path}/serving ]; do sleep 0.05; done; "
        "echo trained in $SKYPILOT_JOBGROUP_NAME\n"
        f"---\nname: server\nresources: {{infra: local}}\nrun: touch {tmp_path}/serving; sleep 100000\n"
    )
    launched = skyhop("jobs", "launch", "-y", str(group), env=env, timeout=300)
    assert launched.returncode == 0, launched.stderr
    job_id = _submitted_id(launched.stderr)
    assert "trained in rl" in launched.stdout
    assert f"Managed job {job_id} (rl): SUCCEEDED" in launched.stderr
    items = json.loads(skyhop("jobs", "queue", "--json", env=env).stdout)["items"]
    assert [(i["job_id"], i["status"], i["primary_tasks"]) for i in items] == [
        (job_id, "SUCCEEDED", ["trainer"])
    ]
    assert items[0]["message"] == "the primary tasks (trainer) succeeded"
