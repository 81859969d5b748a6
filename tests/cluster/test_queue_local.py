"""The job queue and the cluster lifecycle from the CLI: local provider, real dev server and worker."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.contract import ClusterStatus, JobStatus
from skyhop.providers.home import skyhop_home
from skyhop.spec import Task
from tests.conftest import skyhop
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import cluster_up, current_record, unique_cluster
from tests.managed_jobs.support import gate, open_gate

pytestmark = pytest.mark.integration

HALF = f"{(os.cpu_count() or 1) / 2:g}"
"""A job demand such that exactly two jobs fit the local cluster at once."""
FOREVER = "sleep 600"
"""A job that is still running whenever the test looks, however loaded the machine: it outlives the
test's own timeout (pytest-timeout, 300 s), so only a cancel or a stop ends it."""


def _statuses(server: DevServer, cluster: str) -> list[str]:
    return [job.status.value for job in current_record(server.address, cluster).jobs]


def _job_dir(cluster: str, job_id: int, rank: int = 0) -> Path:
    return skyhop_home() / "clusters" / cluster / f"node-{rank}" / "jobs" / f"job-{job_id}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _job_pid(cluster: str, job_id: int, rank: int = 0) -> int:
    return int(json.loads((_job_dir(cluster, job_id, rank) / "state.json").read_text())["pid"])


def _first_job_sleeping(server: DevServer, cli_env: dict[str, str], cluster: str) -> int:
    """Submit job 1 (``FOREVER``) to an idle cluster and wait until it runs; its pid."""
    assert skyhop("exec", cluster, "-d", FOREVER, env=cli_env).returncode == 0
    wait_for(lambda: _statuses(server, cluster) == ["RUNNING"], 30)
    return _job_pid(cluster, 1)


@pytest.fixture
def cluster(temporal_server: DevServer, live_worker: WorkerProcess) -> Iterator[str]:
    """An UP one-node local cluster (no job), taken down afterwards."""
    task = Task(setup="echo ready > setup.txt")
    with cluster_up(temporal_server.address, unique_cluster("q"), task) as name:
        yield name


def test_jobs_queue_fifo_by_demand_and_cancel_stops_processes(
    temporal_server: DevServer, cli_env: dict[str, str], cluster: str
) -> None:
    for _ in range(4):
        out = skyhop("exec", cluster, "-d", "--cpus", HALF, FOREVER, env=cli_env)
        assert out.returncode == 0, out.stderr
    wait_for(lambda: _statuses(temporal_server, cluster)[:2] == ["RUNNING"] * 2, 30, "two jobs running")
    assert _statuses(temporal_server, cluster)[2:] == ["PENDING", "PENDING"]

    queue = skyhop("queue", cluster, env=cli_env)
    assert queue.returncode == 0, queue.stderr
    lines = queue.stdout.splitlines()
    assert lines[1].split() == [
        "ID",
        "NAME",
        "USER",
        "SUBMITTED",
        "STARTED",
        "DURATION",
        "RESOURCES",
        "STATUS",
    ]
    assert [line.split()[0] for line in lines[2:]] == ["4", "3", "2", "1"]  # newest first
    assert lines[2].endswith("PENDING") and f"1x[CPU:{HALF}]" in lines[2]

    pid = _job_pid(cluster, 1)
    cancelled = skyhop("cancel", cluster, "1", env=cli_env)
    assert cancelled.returncode == 0 and "Cancelled job(s) 1" in cancelled.stderr
    wait_for(lambda: not _alive(pid), 15, "job 1's process to be gone")
    # Its slot goes to job 3, the head of the queue.
    wait_for(
        lambda: _statuses(temporal_server, cluster) == ["CANCELLED", "RUNNING", "RUNNING", "PENDING"], 30
    )

    as_json = json.loads(skyhop("queue", cluster, "--json", env=cli_env).stdout)
    assert as_json["kind"] == "jobs" and {job["cluster"] for job in as_json["items"]} == {cluster}
    assert [job["status"] for job in as_json["items"]] == ["PENDING", "RUNNING", "RUNNING", "CANCELLED"]

    unknown = skyhop("cancel", cluster, "99", env=cli_env)
    assert unknown.returncode == 1 and "has no job(s) 99" in unknown.stderr
    pids = [_job_pid(cluster, 2), _job_pid(cluster, 3)]
    assert skyhop("cancel", cluster, "--all", "-y", env=cli_env).returncode == 0
    wait_for(lambda: not any(_alive(p) for p in pids), 15, "every job's process to be gone")
    assert _statuses(temporal_server, cluster) == ["CANCELLED"] * 4
    assert not _job_dir(cluster, 4).exists()  # never started
    assert json.loads(skyhop("queue", cluster, "-s", "--json", env=cli_env).stdout)["items"] == []


def test_a_request_that_can_never_fit_is_refused_with_both_sides(
    cli_env: dict[str, str], cluster: str
) -> None:
    too_big = skyhop("exec", cluster, "--cpus", "512", "echo never", env=cli_env)
    assert too_big.returncode == 1
    assert "Requested: 1x 512 CPU" in too_big.stderr and "Existing: 1x local" in too_big.stderr
    assert "To fix" in too_big.stderr and "Traceback" not in too_big.stderr
    nodes = skyhop("exec", cluster, "--num-nodes", "3", "echo never", env=cli_env)
    assert nodes.returncode == 1 and "more nodes" in nodes.stderr


def test_logs_tail_status_and_after_a_worker_restart(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str], cluster: str
) -> None:
    done = skyhop("exec", cluster, "for i in 1 2 3 4 5; do echo line$i; done", env=cli_env)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "line5"
    assert skyhop("logs", cluster, "1", "--tail", "2", env=cli_env).stdout == "line4\nline5\n"
    assert skyhop("logs", cluster, "1", "--status", env=cli_env).returncode == 0
    assert skyhop("logs", cluster, "7", "--status", env=cli_env).returncode == 102

    script = "for i in $(seq 1 8); do echo tick$i; sleep 0.5; done"
    assert skyhop("exec", cluster, "-d", script, env=cli_env).returncode == 0
    wait_for(lambda: (_job_dir(cluster, 2) / "run.log").exists(), 30, "job 2 to start")
    running = skyhop("logs", cluster, "2", "--status", env=cli_env)
    assert running.returncode == 101 and "RUNNING" in running.stdout
    live_worker.kill9()
    live_worker.start()
    followed = skyhop("logs", cluster, "2", env=cli_env)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines() == [f"tick{i}" for i in range(1, 9)]
    wait_for(lambda: _statuses(temporal_server, cluster) == ["SUCCEEDED", "SUCCEEDED"], 30, "job 2 recorded")

    assert skyhop("exec", cluster, "-d", FOREVER, env=cli_env).returncode == 0
    wait_for(lambda: _statuses(temporal_server, cluster)[-1] == "RUNNING", 30)
    assert skyhop("cancel", cluster, "3", env=cli_env).returncode == 0
    assert skyhop("logs", cluster, "3", "--status", env=cli_env).returncode == 103


def test_stop_keeps_the_disk_and_start_brings_the_cluster_back(
    temporal_server: DevServer, cli_env: dict[str, str], cluster: str
) -> None:
    pid = _first_job_sleeping(temporal_server, cli_env, cluster)

    stopped = skyhop("stop", cluster, "-y", env=cli_env)
    assert stopped.returncode == 0 and "status STOPPED" in stopped.stderr, stopped.stderr
    assert not _alive(pid)
    rec = current_record(temporal_server.address, cluster)
    assert rec.status == ClusterStatus.STOPPED and rec.jobs[0].status == JobStatus.CANCELLED
    assert rec.jobs[0].error == "the cluster was stopped"
    assert "STOPPED" in skyhop("status", env=cli_env).stdout
    refused = skyhop("exec", cluster, "echo x", env=cli_env)
    assert (
        refused.returncode == 1
        and f"STOPPED, not UP; start it with: skyhop start {cluster}" in refused.stderr
    )

    started = skyhop("start", cluster, "-y", "-i", "30", env=cli_env)
    assert started.returncode == 0 and "status UP" in started.stderr, started.stderr
    assert current_record(temporal_server.address, cluster).idle_minutes == 30
    again = skyhop("exec", cluster, "cat setup.txt", env=cli_env)
    assert again.returncode == 0 and again.stdout == "ready\n"  # the disk was kept
    twice = skyhop("start", cluster, "-y", env=cli_env)
    assert twice.returncode == 0

    # A launch on a stopped cluster starts it too (and the provider sees its nodes UP again).
    assert skyhop("stop", cluster, "-y", env=cli_env).returncode == 0
    relaunched = skyhop("launch", "-y", "-c", cluster, "cat setup.txt", env=cli_env)
    assert relaunched.returncode == 0 and relaunched.stdout.endswith("ready\n"), relaunched.stderr
    assert not (skyhop_home() / "clusters" / cluster / "node-0" / "stopped").exists()


def test_autostop_from_the_cli_stops_then_down_removes(
    temporal_server: DevServer, cli_env: dict[str, str], cluster: str, tmp_path: Path
) -> None:
    # The job ends when the test says so (a timed one could end before ``autostop`` is set).
    assert skyhop("exec", cluster, "-d", gate(tmp_path), env=cli_env).returncode == 0
    assert skyhop("autostop", cluster, "-i", "0", env=cli_env).returncode == 0
    # Idle means no job at all: the running job holds the cluster UP until it ends.
    assert current_record(temporal_server.address, cluster).status == ClusterStatus.UP
    open_gate(tmp_path)
    wait_for(
        lambda: current_record(temporal_server.address, cluster).status == ClusterStatus.STOPPED,
        30,
        "autostop",
    )
    assert _statuses(temporal_server, cluster) == ["SUCCEEDED"]
    assert skyhop("start", cluster, "-y", env=cli_env).returncode == 0
    assert skyhop("autostop", cluster, "-i", "0", "--down", env=cli_env).returncode == 0
    wait_for(
        lambda: current_record(temporal_server.address, cluster).status == ClusterStatus.TERMINATED,
        30,
        "autostop --down",
    )
    assert not (skyhop_home() / "clusters" / cluster).exists()
    bad = skyhop("autostop", cluster, "--cancel", "-i", "3", env=cli_env)
    assert bad.returncode == 2 and "--cancel takes no" in bad.stderr


def test_a_node_removed_outside_skyhop_fails_its_job_naming_the_removal(
    temporal_server: DevServer, cli_env: dict[str, str], cluster: str
) -> None:
    pid = _first_job_sleeping(temporal_server, cli_env, cluster)
    runner = json.loads((_job_dir(cluster, 1, 0) / "state.json").read_text())["runner_pid"]
    # Someone deletes the node behind skyhop's back: its processes die with it, the runner first
    # (so it cannot write the job's end into the folder being removed).
    os.kill(runner, signal.SIGKILL)
    os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(skyhop_home() / "clusters" / cluster)
    # The job's watcher notices first (its runner is gone); it must still name the node's removal,
    # not the runner's death, and the cluster must follow without waiting for a refresh.
    wait_for(lambda: _statuses(temporal_server, cluster) == ["FAILED"], 60, "the job's end")
    rec = current_record(temporal_server.address, cluster)
    assert "node 0 is TERMINATED (changed outside skyhop)" in (rec.jobs[0].error or ""), rec.jobs[0].error
    assert rec.status == ClusterStatus.TERMINATED
    listed = skyhop("status", "--refresh", env=cli_env)
    assert listed.returncode == 0 and f"{cluster} " not in listed.stdout
