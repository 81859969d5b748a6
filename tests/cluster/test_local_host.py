"""A ``local`` cluster is bound to the machine whose folders hold it.

Two workers with their own homes and host ids against one dev server are two machines. The launch
provisions on the one that runs it; every later activity of the cluster goes to that machine's
queues, even while the other is the only worker polling: an ``exec`` then waits for the owner,
and the other never looks for the cluster's folders.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skyhop.cli.client import connect
from skyhop.cli.config import TemporalConfig
from skyhop.contract import cluster_workflow_id
from skyhop.contract.job_index import managed_job_workflow_id
from skyhop.contract.watch_hub import watch_hub_shard, watch_hub_workflow_id
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess, wait_for

pytestmark = pytest.mark.integration

_BOOKKEEPING = ("index_job_row", "follow_run", "launch_running", "submit_job")
"""Activities that touch no node (Temporal and the job index only): on the shared queues."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DevServer]:
    """A server of the test's own: the session worker must not take the shared queues' tasks."""
    folder = tmp_path / "temporal"
    folder.mkdir()
    dev = DevServer(folder)
    dev.start()
    yield dev
    dev.stop()


def _machine(server: DevServer, tmp_path: Path, name: str, shared: dict[str, str]) -> WorkerProcess:
    """A worker on a machine of its own, sharing only Temporal, the store and the payload key."""
    home = tmp_path / name
    home.mkdir()
    env = {**shared, "SKYHOP_HOME": str(home / ".skyhop"), "SKYHOP_HOST_ID": name}
    return WorkerProcess(server.address, home, env=env)


def _scheduled(server: DevServer, cluster: str, workflow_id: str | None = None) -> list[tuple[str, str]]:
    """(activity, task queue) of every activity the cluster's workflow (or another) scheduled, in order."""

    async def read() -> list[tuple[str, str]]:
        client = await connect(TemporalConfig(), server.address)
        handle = client.get_workflow_handle(workflow_id or cluster_workflow_id(cluster))
        found = []
        async for event in handle.fetch_history_events():
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled = event.activity_task_scheduled_event_attributes
                found.append((scheduled.activity_type.name, scheduled.task_queue.name))
        return found

    return run(read())


def test_a_local_clusters_activities_run_only_on_its_machine(
    server: DevServer, cli_env: dict[str, str], tmp_path: Path
) -> None:
    shared = {
        "SKYHOP_STORE_URL": (tmp_path / "store").as_uri(),
        "SKYHOP_KEY_FILE": cli_env["SKYHOP_KEY_FILE"],
    }
    owner, other = (
        _machine(server, tmp_path, "machine-a", shared),
        _machine(server, tmp_path, "machine-b", shared),
    )
    env = {
        **cli_env,
        **shared,
        "SKYHOP_TEMPORAL_ADDRESS": server.address,
        "SKYHOP_HOME": str(tmp_path / "laptop"),
    }
    owner.start()
    try:
        done = skyhop("launch", "-y", "-c", "hosted", "--infra", "local", "echo first", env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert (owner.folder / ".skyhop" / "clusters" / "hosted" / "node-0").is_dir()

        other.start()
        owner.stop()  # only the other machine polls the shared queues now
        done = skyhop("exec", "hosted", "-d", "echo second > second.txt", env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        wait_for(
            lambda: ("start_job", "skyhop-long@machine-a") in _scheduled(server, "hosted"),
            120,
            "the second job's start to be scheduled",
        )
        assert not (other.folder / ".skyhop" / "clusters").exists()

        owner.start()  # the owner comes back and runs what waited for it
        wait_for(
            lambda: any(owner.folder.glob(".skyhop/clusters/hosted/node-0/**/second.txt")),
            120,
            "the second job on the owner's node",
        )
        done = skyhop("down", "-y", "hosted", env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert not (owner.folder / ".skyhop" / "clusters" / "hosted").exists()
        scheduled = _scheduled(server, "hosted")
        node_work = [(name, queue) for name, queue in scheduled if name not in _BOOKKEEPING]
        assert node_work and {queue.split("@")[-1] for _, queue in node_work} == {"machine-a"}, scheduled
        assert not (other.folder / ".skyhop" / "clusters").exists()
    finally:
        other.stop()
        owner.stop()


def test_a_managed_job_on_a_local_cluster_is_watched_by_its_machines_hub(
    server: DevServer, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """The run is followed by the shard's hub of the cluster's machine: its poller reads that
    machine's folders, whichever worker the managed job's workflow ran on."""
    shared = {
        "SKYHOP_STORE_URL": (tmp_path / "store").as_uri(),
        "SKYHOP_KEY_FILE": cli_env["SKYHOP_KEY_FILE"],
    }
    machines = [_machine(server, tmp_path, name, shared) for name in ("machine-a", "machine-b")]
    env = {
        **cli_env,
        **shared,
        "SKYHOP_TEMPORAL_ADDRESS": server.address,
        "SKYHOP_HOME": str(tmp_path / "laptop"),
    }
    try:
        for machine in machines:
            machine.start()
        done = skyhop("jobs", "launch", "-y", "--infra", "local", "echo managed", env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        job = managed_job_workflow_id(1)  # the first managed job of a new server
        node_work = [queue for name, queue in _scheduled(server, "", job) if name not in _BOOKKEEPING]
        hosts = {queue.partition("@")[2] for queue in node_work}
        assert len(hosts) == 1 and hosts <= {"machine-a", "machine-b"}, node_work
        [host] = hosts
        hub = watch_hub_workflow_id(watch_hub_shard(1), host)
        assert ("watch_followed", f"skyhop-long@{host}") in _scheduled(server, "", hub)
    finally:
        for machine in machines:
            machine.stop()
