"""One recovery on AWS (moto's EC2): an instance terminated through the EC2 API is a preemption, and
the managed job goes on on a new instance with the same ``SKYHOP_TASK_ID``.

moto's instances are real machines here (``InstanceHosts``): each new one gets the address of a
free sshd test host in a network namespace, which lets skyhop's cloud key in as ``ubuntu`` (home
``/home/ubuntu``), as an EC2 Ubuntu image does; terminating the instance kills its host.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.managed_jobs import EndReason
from skyhop.providers.aws.provider import SSH_USER
from skyhop.providers.keys import public_key
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for
from tests.managed_jobs.support import gate, job_log, open_gate, start_job, until_log, until_state
from tests.netns import can_netns
from tests.providers.aws_support import InstanceHosts, aws_instances, reset
from tests.ssh.hosts import SSHHosts

pytestmark = pytest.mark.integration

SPOT = Resources(infra="aws/us-east-1", instance_type="m6i.large", use_spot=True)


@pytest.fixture
def instance_hosts(moto: str, tmp_path: Path) -> Iterator[InstanceHosts]:
    """An emptied moto whose instances run on two sshd hosts of the test's own."""
    if not can_netns():
        pytest.skip("EC2 nodes are reached on port 22 of their own address: this needs network namespaces")
    reset(moto)
    (tmp_path / "sshd").mkdir()
    with SSHHosts(tmp_path / "sshd", 2, login=SSH_USER).running() as hosts:
        hosts.authorise(public_key())
        pool = InstanceHosts(hosts.hosts)
        with pool.install():
            yield pool


def test_an_instance_terminated_through_the_ec2_api_is_recovered_on_a_new_one(
    temporal_server: DevServer, live_worker: WorkerProcess, instance_hosts: InstanceHosts, tmp_path: Path
) -> None:
    first_host, second_host = instance_hosts.free
    task = Task(
        run=f'echo "attempt of $SKYHOP_TASK_ID on $(hostname)"; {gate(tmp_path)}; echo finished',
        resources=SPOT,
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [task])
        running = await until_state(handle, lambda s: s.status == ManagedJobStatus.RUNNING, "the run", 180)
        job_id, cluster = running.job_id, running.tasks[0].cluster_name
        until_log(job_id, 0, 1, "attempt of", 60)
        [first] = aws_instances(cluster=cluster)
        assert first["PublicIpAddress"] == first_host.address

        ec2 = boto3.session.Session().client("ec2", region_name="us-east-1")
        ec2.terminate_instances(InstanceIds=[first["InstanceId"]])
        await until_state(handle, lambda s: s.status == ManagedJobStatus.RECOVERING, "the recovery", 60)
        await until_state(handle, lambda s: s.status == ManagedJobStatus.RUNNING, "the second run", 180)
        until_log(job_id, 0, 2, "attempt of", 60)
        [second] = aws_instances(cluster=cluster)
        assert second["InstanceId"] != first["InstanceId"]
        assert second["PublicIpAddress"] == second_host.address

        open_gate(tmp_path)
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED and final.end is not None
        assert final.end.reason == EndReason.SUCCEEDED
        [state] = final.tasks
        assert state.recoveries == 1
        assert [a.outcome for a in state.attempts] == ["preempted", "succeeded"]
        assert [job_log(job_id, 0, n) for n in (1, 2)] == [
            f"attempt of {state.task_id} on {first_host.name}\n",
            f"attempt of {state.task_id} on {second_host.name}\nfinished\n",
        ]
        assert aws_instances() == []

    run(scenario())
