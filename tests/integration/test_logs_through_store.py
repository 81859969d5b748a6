"""Logs reach a CLI that shares nothing with the worker but Temporal and the store.

The CLI and the worker have homes of their own (the worker's holds the local nodes; the CLI's has
no node and no node key), one Temporal server of the test's own, and one store: a folder both
name, or a bucket on moto's S3. ``launch`` streams setup's and the run's output, ``logs`` prints a
finished job and follows a running one to its end, and ``jobs logs`` prints a managed job's.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from skyhop.cli.config import TemporalConfig
from skyhop.cli.payload_key import default_key_file, load_payload_key
from tests.conftest import skyhop
from tests.helpers import SKYHOP_CLI, DevServer, WorkerProcess, kill_leftover_jobs
from tests.integration.support import unique_cluster
from tests.providers.aws_support import reset
from tests.providers.conftest import moto

pytestmark = pytest.mark.integration

__all__ = ["moto"]


@pytest.fixture(params=["folder", "s3"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "folder":
        return (tmp_path / "shared-store").as_uri()
    reset(request.getfixturevalue("moto"))
    bucket = f"skyhop-logs-{uuid.uuid4().hex[:8]}"
    boto3.session.Session().client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/deployment"


@pytest.fixture
def machines(store_url: str, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, Path]]:
    """(the CLI's environment, the CLI's home, the worker's home), with a server and worker running."""
    load_payload_key(TemporalConfig())  # the deployment's key, given to both by path
    shared = {"SKYHOP_STORE_URL": store_url, "SKYHOP_KEY_FILE": str(default_key_file())}
    server = DevServer(tmp_path)
    server.start()
    worker_home, cli_home = tmp_path / "worker-home", tmp_path / "laptop-home"
    worker = WorkerProcess(server.address, tmp_path, {**shared, "SKYHOP_HOME": str(worker_home)})
    cli_env = {
        **os.environ,
        **shared,
        "SKYHOP_HOME": str(cli_home),
        "SKYHOP_TEMPORAL_ADDRESS": server.address,
    }
    try:
        worker.start()
        yield cli_env, cli_home, worker_home
    finally:
        kill_leftover_jobs(worker_home)
        worker.stop()
        server.stop()


def test_launch_logs_and_jobs_logs_print_the_output_with_only_temporal_and_the_store(
    machines: tuple[dict[str, str], Path, Path], tmp_path: Path
) -> None:
    env, cli_home, worker_home = machines
    gate = tmp_path / "gate"
    (tmp_path / "task.yaml").write_text(
        "resources: {infra: local}\nsetup: echo setting-up\nrun: |\n  echo line-1\n  echo line-2\n"
    )
    cluster = unique_cluster()
    try:
        launched = skyhop("launch", "-y", "-c", cluster, "task.yaml", env=env, cwd=tmp_path, timeout=300)
        assert launched.returncode == 0, launched.stderr[-2000:]
        assert launched.stdout.splitlines()[-2:] == ["line-1", "line-2"], launched.stdout
        assert "setting-up" in launched.stderr

        finished = skyhop("logs", cluster, "1", env=env)
        assert finished.returncode == 0, finished.stderr
        assert finished.stdout == "line-1\nline-2\n"

        script = f"echo before; while [ ! -e {gate} ]; do sleep 0.05; done; echo after"
        started = skyhop("exec", "-d", cluster, script, env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stderr[-2000:]
        follower = subprocess.Popen(
            [SKYHOP_CLI, "logs", cluster, "2"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert follower.stdout is not None
        assert follower.stdout.readline() == "before\n"  # while the job runs: it waits at the gate
        assert follower.poll() is None
        gate.touch()
        out, err = follower.communicate(timeout=120)
        assert follower.returncode == 0, err
        assert out == "after\n"

        managed = skyhop(
            "jobs", "launch", "-y", "--infra", "local", "-n", "m", "echo managed-out", env=env, timeout=300
        )
        assert managed.returncode == 0, managed.stderr[-2000:]
        assert "managed-out" in managed.stdout
        found = re.search(r"[Mm]anaged job (\d+)", managed.stderr)
        assert found is not None, managed.stderr
        logs = skyhop("jobs", "logs", found.group(1), env=env)
        assert logs.returncode == 0 and logs.stdout.splitlines() == ["managed-out"], logs.stderr

        assert not (cli_home / "clusters").exists()  # the laptop never had a node
        assert (worker_home / "clusters" / cluster).is_dir()
    finally:
        skyhop("down", "-y", cluster, env=env)
