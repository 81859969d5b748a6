"""The queue on the nodes of a sim cluster: per-node placement, multi-node logs, stop/start, lost nodes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.contract import ClusterStatus, JobStatus
from skyhop.providers.sim import SimCloud
from skyhop.spec import Resources, Task
from tests.cluster.test_queue_local import _alive, _statuses
from tests.conftest import skyhop
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import cluster_up, current_record, unique_cluster
from tests.providers.sim_support import enabled_sim

pytestmark = pytest.mark.integration


@pytest.fixture
def sim_cluster(temporal_server: DevServer, live_worker: WorkerProcess, tmp_path: Path) -> Iterator[str]:
    """An UP two-node sim cluster (2 vCPUs a node), taken down afterwards."""
    name = unique_cluster("qs")
    task = Task(num_nodes=2, resources=Resources(infra="sim"), setup="echo set-up > setup.txt")
    with enabled_sim(tmp_path), cluster_up(temporal_server.address, name, task):
        yield name


def _pid(server: DevServer, cluster: str, job_id: int, rank: int) -> int:
    import json

    rec = current_record(server.address, cluster)
    assert rec.handle is not None
    job = next(j for j in rec.jobs if j.job_id == job_id)
    node = rec.handle.nodes[job.placement[rank].node]
    state = json.loads((Path(node.runtime_dir) / "jobs" / job.key / "state.json").read_text())
    return int(state["pid"])


def test_jobs_take_whole_nodes_in_order_and_a_wide_job_waits_at_the_head(
    temporal_server: DevServer, cli_env: dict[str, str], sim_cluster: str
) -> None:
    cluster = sim_cluster
    for command in ("sleep 60", "sleep 60", "echo wide; sleep 1", "echo after"):
        nodes = "2" if command.startswith("echo wide") else "1"
        out = skyhop("exec", cluster, "-d", "--cpus", "2", "--num-nodes", nodes, command, env=cli_env)
        assert out.returncode == 0, out.stderr
    wait_for(lambda: _statuses(temporal_server, cluster)[:2] == ["RUNNING", "RUNNING"], 60, "jobs 1 and 2")
    rec = current_record(temporal_server.address, cluster)
    assert [[a.node for a in job.placement] for job in rec.jobs[:2]] == [[0], [1]]
    # The two-node job 3 needs both nodes; job 4 would fit after job 1 but must not overtake it.
    assert _statuses(temporal_server, cluster)[2:] == ["PENDING", "PENDING"]
    pid = _pid(temporal_server, cluster, 1, 0)
    assert skyhop("cancel", cluster, "1", env=cli_env).returncode == 0
    wait_for(lambda: not _alive(pid), 15, "job 1's process to end")
    assert _statuses(temporal_server, cluster)[2:] == ["PENDING", "PENDING"]
    assert skyhop("cancel", cluster, "2", env=cli_env).returncode == 0
    wait_for(
        lambda: _statuses(temporal_server, cluster)[2:] == ["SUCCEEDED", "SUCCEEDED"], 60, "jobs 3 and 4"
    )
    assert [a.node for a in current_record(temporal_server.address, cluster).jobs[2].placement] == [0, 1]
    wide = skyhop("logs", cluster, "3", "--tail", "5", env=cli_env)
    assert wide.returncode == 0
    assert sorted(wide.stdout.splitlines()) == ["(rank 0, 127.0.0.1) wide", "(rank 1, 127.0.0.1) wide"]


def test_stop_start_and_a_node_terminated_outside_skyhop(
    temporal_server: DevServer, cli_env: dict[str, str], sim_cluster: str
) -> None:
    cluster = sim_cluster
    assert skyhop("stop", cluster, "-y", env=cli_env).returncode == 0
    states = {i["state"] for i in SimCloud().describe(cluster)}
    assert (
        states == {"stopped"}
        and current_record(temporal_server.address, cluster).status == ClusterStatus.STOPPED
    )
    started = skyhop("start", cluster, "-y", env=cli_env)
    assert started.returncode == 0, started.stderr
    assert {i["state"] for i in SimCloud().describe(cluster)} == {"running"}
    kept = skyhop("exec", cluster, "--num-nodes", "2", "cat setup.txt", env=cli_env)
    assert kept.returncode == 0 and kept.stdout.count("set-up") == 2  # the disks were kept

    for _ in range(2):
        out = skyhop("exec", cluster, "-d", "--cpus", "2", "sleep 60", env=cli_env)
        assert out.returncode == 0, out.stderr
    wait_for(lambda: _statuses(temporal_server, cluster)[-2:] == ["RUNNING", "RUNNING"], 60)
    rec = current_record(temporal_server.address, cluster)
    assert rec.handle is not None
    on_node_1 = next(j for j in rec.jobs if j.placement and j.placement[0].node == 1 and not j.status.done)
    SimCloud().terminate([rec.handle.nodes[1].instance_id])  # behind skyhop's back
    refreshed = skyhop("status", "--refresh", env=cli_env)
    assert refreshed.returncode == 0
    assert f"{cluster}: node 1 is TERMINATED (changed outside skyhop)" in refreshed.stderr
    row = next(line for line in refreshed.stdout.splitlines() if line.startswith(cluster))
    assert " INIT (degraded) " in row
    rec = current_record(temporal_server.address, cluster)
    lost = next(j for j in rec.jobs if j.job_id == on_node_1.job_id)
    assert lost.status == JobStatus.FAILED and "node 1 is TERMINATED" in (lost.error or "")
    assert [j.status for j in rec.jobs if j.placement and j.placement[0].node == 0][-1] == JobStatus.RUNNING
