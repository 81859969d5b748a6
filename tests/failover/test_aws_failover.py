"""Failover and durability on AWS through boto3 against moto's server, with a real dev server and worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from skyhop.spec import Resources, Task
from tests.conftest import run, skyhop
from tests.failover.support import start_launch
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, down, unique_cluster
from tests.providers.aws_support import MotoFaults, aws_instances

pytestmark = pytest.mark.integration

# Spot candidates are per zone; in the shipped catalog us-east-1f is the cheapest, then us-east-1b.
SPOT = Resources(infra="aws/us-east-1", instance_type="m6i.large", use_spot=True)


def test_cli_launch_fails_over_from_a_full_zone_and_down_leaves_nothing(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    cli_env: dict[str, str],
    faults: MotoFaults,
    tmp_path: Path,
) -> None:
    faults.full_zones.add("us-east-1f")
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({"resources": SPOT.model_dump(exclude_none=True, exclude_defaults=True)}))
    cluster = unique_cluster("aws")
    done = skyhop("launch", "-y", "-c", cluster, str(task), env=cli_env)
    assert done.returncode == 0, done.stderr
    assert "aws us-east-1f: capacity (InsufficientInstanceCapacity) — trying us-east-1b" in done.stderr
    instances = aws_instances(cluster=cluster)
    assert [i["Placement"]["AvailabilityZone"] for i in instances] == ["us-east-1b"]
    assert instances[0]["InstanceLifecycle"] == "spot"
    gone = skyhop("down", "-y", cluster, env=cli_env)
    assert gone.returncode == 0, gone.stderr
    assert aws_instances(cluster=cluster) == []


def test_worker_killed_mid_attempt_the_launch_completes_with_exactly_the_nodes_asked_for(
    temporal_server: DevServer, live_worker: WorkerProcess, faults: MotoFaults
) -> None:
    faults.delay_s = 2.0  # each RunInstances call takes 2 s, so the kill lands between ranks
    cluster = unique_cluster("awskill")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_launch(client, cluster, Task(num_nodes=3, resources=SPOT))
        await asyncio.to_thread(
            wait_for, lambda: len(aws_instances(cluster=cluster)) == 1, 60, "the first node"
        )
        live_worker.kill9()
        live_worker.start()
        faults.delay_s = 0.0
        result = await handle.result()
        assert len(result.handle.nodes) == 3
        instances = aws_instances(cluster=cluster)
        assert len(instances) == 3
        assert len({i["Placement"]["AvailabilityZone"] for i in instances}) == 1
        await down(client, cluster)
        assert aws_instances(cluster=cluster) == []

    run(scenario())
