"""A cloud without usable credentials: the launch fails over within seconds and says why.

The worker's boto3 finds moto's endpoint in ``~/.aws/config`` but no credentials anywhere, as on
a machine where ``aws configure`` was never run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from skyhop.contract import ClusterStatus
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for, record, unique_cluster

pytestmark = pytest.mark.integration

_BOUND_S = 60


@contextlib.contextmanager
def _no_aws_credentials() -> Iterator[None]:
    """Hide ``~/.aws/credentials`` (boto3 reads it on every new session) for the block."""
    credentials = Path(os.environ["HOME"]) / ".aws" / "credentials"
    saved = credentials.read_text()
    credentials.unlink()
    try:
        yield
    finally:
        credentials.write_text(saved)


def test_a_launch_on_aws_without_credentials_fails_within_seconds_saying_why(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    moto: str,
    tmp_path: Path,
) -> None:
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({"resources": {"infra": "aws/us-east-1", "instance_type": "m6i.large"}}))
    cluster = unique_cluster("nocred")
    env = {key: value for key, value in cli_env.items() if not key.startswith("AWS_")}
    with _no_aws_credentials():
        started = time.monotonic()
        done = skyhop("launch", "-y", "-c", cluster, str(task), env=env, timeout=_BOUND_S + 30)
        took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert took < _BOUND_S, f"{took:.0f}s"
    assert "credentials (NoCredentialsError)" in done.stderr
    assert "Unable to locate credentials" in done.stderr
    assert "Traceback" not in done.stderr

    async def cluster_status() -> ClusterStatus:
        return (await record(await client_for(temporal_server.address), cluster)).status

    assert run(cluster_status()) == ClusterStatus.TERMINATED
