"""``skyhop launch --infra ssh/<pool>`` end to end: a real dev server and worker, real sshd hosts."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from skyhop.contract import JobStatus
from skyhop.providers.base import NodeHandle
from skyhop.providers.ssh import SSHProvider
from skyhop.providers.ssh.connection import close_connections
from skyhop.providers.ssh.deployment import fetch_inventory
from skyhop.spec import Resources, Task
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess, until_true, wait_for
from tests.integration.support import client_for, launched, record, unique_cluster, until_job_done
from tests.ssh.conftest import inventory, pools_yaml, ssh_up
from tests.ssh.hosts import SSHHosts

pytestmark = pytest.mark.integration


async def _log(node: NodeHandle, key: str) -> bytes:
    try:
        return await SSHProvider().runtime(node).read_log(key, 0)
    finally:
        await close_connections()


def _job_log(node: NodeHandle, key: str) -> bytes:
    """The job's log on a node, from a thread outside the test's event loop."""
    return run(_log(node, key))


def test_two_node_launch_runs_setup_and_run_on_every_node_with_rank_variables(
    ssh_hosts: SSHHosts, lab_pool: str, cli_env: dict[str, str], live_worker: WorkerProcess, tmp_path: Path
) -> None:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "data.txt").write_text("from the workdir\n")
    (workdir / ".gitignore").write_text("*.ckpt\n")
    (workdir / "big.ckpt").write_text("never synced\n")
    task = tmp_path / "task.yaml"
    task.write_text(
        f"workdir: {workdir}\n"
        "setup: echo setup-on-$(hostname) > setup-ran\n"
        "run: |\n"
        '  echo "rank=$SKYHOP_NODE_RANK twin=$SKYPILOT_NODE_RANK n=$SKYHOP_NUM_NODES"'
        ' "gpus=$SKYHOP_NUM_GPUS_PER_NODE"\n'
        '  echo "ips=$(printf %s "$SKYPILOT_NODE_IPS" | tr "\\n" ,)"\n'
        '  echo "info=$SKYHOP_CLUSTER_INFO"\n'
        "  cat data.txt setup-ran; ls big.ckpt 2>/dev/null || echo no-ckpt\n"
    )
    cluster = unique_cluster("ssh")
    out = skyhop(
        "launch",
        "-y",
        "-c",
        cluster,
        "--infra",
        f"ssh/{lab_pool}",
        "--num-nodes",
        "2",
        str(task),
        env=cli_env,
    )
    assert out.returncode == 0, out.stderr
    first, second = ssh_hosts.hosts[0], ssh_hosts.hosts[1]
    ips = f"{first.address},{second.address}"
    for rank, host in enumerate((first, second)):
        prefix = f"(rank {rank}, {host.address}) "
        lines = [line.removeprefix(prefix) for line in out.stdout.splitlines() if line.startswith(prefix)]
        assert lines[:3] == [f"rank={rank} twin={rank} n=2 gpus=0", f"ips={ips}", lines[2]], out.stdout
        info = json.loads(lines[2].removeprefix("info="))
        assert info == {"cluster_name": cluster, "cloud": "ssh", "region": lab_pool, "zone": None}
        assert lines[3] == "from the workdir" and lines[5] == "no-ckpt"
        if not ssh_hosts.loopback:
            assert lines[4] == f"setup-on-node{rank + 1}"
    held = inventory().held_by(cluster)
    assert {rank: h.spec.address for rank, h in held.items()} == {0: first.address, 1: second.address}
    status = skyhop("status", env=cli_env)
    assert cluster in status.stdout and f"ssh/{lab_pool}" in status.stdout
    assert skyhop("down", "-y", cluster, env=cli_env).returncode == 0
    assert inventory().held_by(cluster) == {}


def test_a_job_survives_a_worker_kill_9_and_runs_once(
    temporal_server: DevServer, live_worker: WorkerProcess, lab_pool: str
) -> None:
    cluster = unique_cluster("ssh")
    task = Task(
        num_nodes=2,
        run="echo start-$SKYHOP_NODE_RANK; sleep 12; echo end-$SKYHOP_NODE_RANK",
        resources=Resources(infra=f"ssh/{lab_pool}", accelerators=None),
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        async with launched(client, cluster, task) as result:
            node = result.handle.nodes[1]
            await asyncio.to_thread(
                wait_for, lambda: _job_log(node, "job-1") == b"start-1\n", 30, "the job to start"
            )
            live_worker.kill9()
            await asyncio.sleep(1)
            live_worker.start()
            await until_job_done(temporal_server.address, cluster, 60, "the job to end")
            job = (await record(client, cluster)).jobs[0]
            assert job.status == JobStatus.SUCCEEDED, job
            for rank, node in enumerate(result.handle.nodes):
                assert await _log(node, "job-1") == f"start-{rank}\nend-{rank}\n".encode()  # ran once

    run(scenario())


def _doomed_pool(hosts: SSHHosts, tmp_path: Path) -> str:
    name = f"doomed-{hosts.tag}"
    ssh_up(pools_yaml(tmp_path / "doomed.yaml", {name: hosts.hosts}, hosts.key), dict(os.environ))
    return name


@pytest.mark.parametrize("failure", ["killed", "unplugged"])
def test_a_node_lost_mid_job_fails_the_job_naming_it(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    doomed_hosts: SSHHosts,
    pools_in_temporal: None,
    tmp_path: Path,
    failure: str,
) -> None:
    if failure == "unplugged" and doomed_hosts.loopback:
        pytest.skip("loopback hosts have no link to unplug")
    pool = _doomed_pool(doomed_hosts, tmp_path)
    cluster = unique_cluster("ssh")
    task = Task(num_nodes=2, run="echo up; sleep 300", resources=Resources(infra=f"ssh/{pool}"))
    lost = doomed_hosts.hosts[1]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        async with launched(client, cluster, task) as result:
            for node in result.handle.nodes:
                await asyncio.to_thread(
                    wait_for, lambda n=node: _job_log(n, "job-1") == b"up\n", 30, "the job"
                )
            if failure == "killed":
                lost.kill()
            else:
                lost.link(up=False)
            # The node is lost after NODE_LOST_AFTER_S of silence, then the head's part is stopped (up to
            # CANCEL_TIMEOUT_S): well within 120 s, which leaves room for a loaded CI machine.
            await until_job_done(temporal_server.address, cluster, 120, "the job to fail")
            rec = await record(client, cluster)
            job = rec.jobs[0]
            assert job.status == JobStatus.FAILED
            assert job.error is not None and f"node 1 ({lost.address}) stopped answering" in job.error
            if getattr(rec, "degraded", None) is not None:
                assert "stopped answering" in str(rec.degraded)
            # The surviving node's part of the job was stopped.
            head = SSHProvider().runtime(result.handle.nodes[0])
            state = await head.job_state("job-1")
            assert state is not None and state.status == "CANCELLED"
            await close_connections()
        assert (await fetch_inventory()).held_by(cluster) == {}

    run(scenario())


def test_a_failing_node_fails_the_gang_with_its_exit_code_and_stops_the_others(
    temporal_server: DevServer, live_worker: WorkerProcess, lab_pool: str
) -> None:
    cluster = unique_cluster("ssh")
    task = Task(
        num_nodes=2,
        run='if [ "$SKYHOP_NODE_RANK" = 1 ]; then sleep 1; exit 7; fi; echo waiting; sleep 300',
        resources=Resources(infra=f"ssh/{lab_pool}"),
    )

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        async with launched(client, cluster, task) as result:
            await until_job_done(temporal_server.address, cluster, 60, "the job to end")
            job = (await record(client, cluster)).jobs[0]
            assert (job.status, job.exit_code, job.failed_rank) == (JobStatus.FAILED, 7, 1)
            head = SSHProvider().runtime(result.handle.nodes[0])

            async def head_cancelled() -> bool:
                state = await head.job_state("job-1")
                return state is not None and state.status == "CANCELLED"

            # The node records CANCELLED once its killed processes are gone, which on a busy
            # machine can come after the job's end was recorded.
            await until_true(head_cancelled, "the head node's job to be CANCELLED")
            await close_connections()

    run(scenario())
