"""Task fields that change what runs, on a real dev server and worker process (local provider):
a git workdir checked out at its ref, secrets in the job's environment."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError

from skyhop.contract import ClusterUpdate, ErrorType, JobStatus, cluster_workflow_id
from skyhop.contract.clusters import JobRecord, JobSubmission
from skyhop.spec import GitWorkdir, task_from_dict
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import (
    client_for,
    current_record,
    down,
    launch,
    launched,
    record,
    unique_cluster,
    until_job_done,
)

pytestmark = pytest.mark.integration


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@x", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose tag ``v1`` holds ``version.txt`` = one and whose branch head holds two."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet", "-b", "main")
    for version in ("one", "two"):
        (repo / "version.txt").write_text(f"{version}\n")
        _git(repo, "add", "version.txt")
        _git(repo, "commit", "--quiet", "-m", version)
        if version == "one":
            _git(repo, "tag", "v1")
    return repo, _git(repo, "rev-parse", "v1")


def test_a_git_workdir_is_checked_out_at_its_ref_on_the_node(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    repo, v1 = _repo(tmp_path)
    cluster = unique_cluster()
    task = task_from_dict(
        {
            "workdir": {"url": f"file://{repo}", "ref": "v1"},
            "envs": {"TOKEN": "from-envs"},
            "secrets": {"TOKEN": "from-secrets"},
            "run": 'cat version.txt; git rev-parse HEAD; echo "token=$TOKEN"',
        },
        tmp_path,
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        async with launched(client, cluster, task) as result:
            await until_job_done(temporal_server.address, cluster, 60, "job 1")
            assert (await record(client, cluster)).jobs[0].status == JobStatus.SUCCEEDED
            log = (Path(result.handle.nodes[0].runtime_dir) / "jobs" / "job-1" / "run.log").read_text()
            assert log.split() == ["one", v1, "token=from-secrets"]
            # exec at another ref: the workdir is checked out again before the job
            later = task.model_copy(update={"workdir_git": GitWorkdir(url=f"file://{repo}", ref="main")})
            submission = JobSubmission(request_id="exec-main", task=later, user="tester", sync_workdir=True)
            handle = client.get_workflow_handle(cluster_workflow_id(cluster))
            await handle.execute_update(ClusterUpdate.SUBMIT_JOB, submission, result_type=JobRecord)
            await asyncio.to_thread(
                wait_for,
                lambda: current_record(temporal_server.address, cluster).jobs[1].status.done,
                60,
                "job 2",
            )
            log = (Path(result.handle.nodes[0].runtime_dir) / "jobs" / "job-2" / "run.log").read_text()
            assert log.split()[0] == "two"

    run(scenario())


def test_a_git_workdir_at_a_missing_ref_fails_the_launch_saying_so(
    temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path
) -> None:
    repo, _ = _repo(tmp_path)
    cluster = unique_cluster()
    task = task_from_dict(
        {"workdir": {"url": f"file://{repo}", "ref": "no-such-ref"}, "run": "true"}, tmp_path
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        with pytest.raises(WorkflowFailureError) as failed:
            await launch(client, cluster, task)
        chain, error = [], failed.value.cause
        while error is not None:
            chain.append(f"{getattr(error, 'type', '')} {error}")
            error = getattr(error, "cause", None)
        assert any(ErrorType.GIT_WORKDIR_FAILED.value in item and "no-such-ref" in item for item in chain), (
            chain
        )
        await down(client, cluster)

    run(scenario())
