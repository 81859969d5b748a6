"""Record ``ClusterWorkflow`` histories for the replay tests: ``python -m tests.cluster.record_histories``.

Run it only when adding a scenario. A code change that makes an existing history fail to replay
would break clusters that are running right now: guard the change with ``workflow.patched``
instead of re-recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from skyhop.contract import LAUNCH_WORKFLOW, WORKFLOW_QUEUE, JobStatus, cluster_workflow_id
from skyhop.contract.clusters import (
    AutostopRequest,
    CancelRequest,
    ClusterRecord,
    JobRecord,
    JobSubmission,
    LaunchRequest,
    LaunchResult,
    StartRequest,
)
from skyhop.spec import Resources, Task
from skyhop.workflows.cluster import ClusterWorkflow
from tests.cluster.fakes import FakeCloud, query_status, running_cluster, up_record
from tests.cluster.test_autostop import time_skipping
from tests.helpers import DevServer, WorkerProcess, wait_for
from tests.integration.support import client_for, cluster_up, current_record, down, launch, record
from tests.providers.sim_support import enabled_sim

HISTORIES = Path(__file__).parent / "histories"

Handle = WorkflowHandle[ClusterWorkflow, ClusterRecord]


async def _until(handle: Handle, predicate: object) -> ClusterRecord:
    while True:
        record = await query_status(handle)
        if predicate(record):  # type: ignore[operator]
            return record
        await asyncio.sleep(0.05)


async def _save(client: Client, handle: Handle, name: str, run_id: str | None = None) -> None:
    history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
    (HISTORIES / f"{name}.json").write_text(history.to_json())
    print(f"recorded {name}: {len(history.events)} events")


async def lifecycle(client: Client, name: str = "lifecycle") -> None:
    """Queue, placement, cancel, refresh, autostop setting, stop, start, down.

    Recorded twice: ``lifecycle`` before job watchers (its jobs are ``wait_job`` activities) and
    ``lifecycle_watched`` after (one ``watch_jobs`` at a time follows them).
    """
    cloud = FakeCloud()
    cloud.hold_jobs = True
    async with running_cluster(client, up_record("lifecycle", cpus=1), cloud) as h:
        half = Task(run="sleep 1", resources=Resources(cpus="0.5"))
        for i in range(3):
            await h.execute_update(ClusterWorkflow.submit_job, JobSubmission(request_id=f"r{i}", task=half))
        await _until(h, lambda r: [j.status for j in r.jobs][:2] == [JobStatus.RUNNING] * 2)
        await h.execute_update(ClusterWorkflow.cancel, CancelRequest(job_ids=[1]))
        await _until(h, lambda r: r.jobs[2].status == JobStatus.RUNNING)
        cloud.released.add("job-2")
        await _until(h, lambda r: r.jobs[1].status == JobStatus.SUCCEEDED)
        await h.execute_update(ClusterWorkflow.refresh)
        await h.execute_update(ClusterWorkflow.set_autostop, AutostopRequest(idle_minutes=10))
        await h.execute_update(ClusterWorkflow.stop)
        await h.execute_update(ClusterWorkflow.start, StartRequest(idle_minutes=5, down=True))
        await h.execute_update(ClusterWorkflow.down)
        await h.result()
        await _save(client, h, name)


async def autostop(client: Client, sleep: object) -> None:
    """An idle cluster stops itself on its durable timer; a later job resets nothing (it is STOPPED)."""
    cloud = FakeCloud()
    async with running_cluster(client, up_record("autostop", idle_minutes=10), cloud) as h:
        await sleep(timedelta(minutes=11))  # type: ignore[operator]
        await _until(h, lambda r: r.status.value == "STOPPED")
        await h.execute_update(ClusterWorkflow.down)
        await h.result()
        await _save(client, h, "autostop")


async def continue_as_new(client: Client) -> None:
    """Jobs submitted across a forced continue-as-new; the first run's history ends with it."""
    cloud = FakeCloud()
    async with running_cluster(client, up_record("can"), cloud, history_limit=40) as h:
        first = (await h.describe()).run_id
        for i in range(12):
            await h.execute_update(
                ClusterWorkflow.submit_job, JobSubmission(request_id=f"r{i}", task=Task(run="true"))
            )
        await _until(h, lambda r: len(r.jobs) == 12 and all(j.status.done for j in r.jobs))
        await _save(client, h, "continue_as_new_first_run", run_id=first)


@contextlib.contextmanager
def _real_server() -> Iterator[tuple[DevServer, WorkerProcess]]:
    """A dev server and a worker process under a HOME of their own, as in the tests."""
    folder = Path(tempfile.mkdtemp(prefix="record-"))
    os.environ.update(HOME=str(folder), SKYHOP_HOME=str(folder / ".skyhop"))
    for variable in [v for v in os.environ if v.startswith("SKYHOP_TEMPORAL_")]:
        del os.environ[variable]
    server = DevServer(folder)
    server.start()
    worker = WorkerProcess(server.address, folder)
    worker.start()
    try:
        with enabled_sim(folder):
            yield server, worker
    finally:
        worker.stop()
        server.stop()


def _save_real(address: str, cluster: str, name: str) -> None:
    async def save() -> None:
        client = await client_for(address)
        history = await client.get_workflow_handle(cluster_workflow_id(cluster)).fetch_history()
        (HISTORIES / f"{name}.json").write_text(history.to_json())
        print(f"recorded {name}: {len(history.events)} events")

    asyncio.run(save())


def parallel_submits_worker_killed(name: str = "parallel_submits_worker_killed") -> None:
    """Twelve ``submit_job`` updates at once on a two-node sim cluster; the worker is killed by
    SIGKILL while they are handled and a new one takes over (a workflow task times out mid-burst).

    A real dev server and worker process: an in-process worker cannot be killed mid-task.
    """
    cluster = "rec-parallel-submits"
    with (
        _real_server() as (server, worker),
        cluster_up(server.address, cluster, Task(num_nodes=2, resources=Resources(infra="sim"))),
    ):

        async def submit_all() -> None:
            client = await client_for(server.address)
            handle = client.get_workflow_handle(cluster_workflow_id(cluster))
            submissions = [JobSubmission(request_id=f"exec:{i}", task=Task(run="sleep 2")) for i in range(12)]
            await asyncio.gather(
                *(
                    handle.execute_update("submit_job", s, id=s.request_id, result_type=JobRecord)
                    for s in submissions
                )
            )

        burst = threading.Thread(target=lambda: asyncio.run(submit_all()))
        burst.start()
        wait_for(lambda: len(current_record(server.address, cluster).jobs) >= 3, 60, "the first jobs")
        worker.kill9()
        worker.start()
        burst.join(180)
        wait_for(
            lambda: all(j.status.done for j in current_record(server.address, cluster).jobs),
            120,
            "every job",
        )
        _save_real(server.address, cluster, name)


def lock_lease(name: str = "lock_lease") -> None:
    """The lock with leases: a launch claims with the cluster's start and releases; a launch holding
    the lock is terminated and its lease gives the lock back; ``down`` cancels a holding launch
    and one waiting in the queue."""
    cluster = "rec-lock-lease"
    local = Resources(infra="local")
    holding = Task(setup="sleep 600", run="echo never", resources=local)

    async def scenario(address: str) -> None:
        client = await client_for(address)
        await launch(client, cluster, Task(resources=local))

        async def start() -> WorkflowHandle[Any, LaunchResult]:
            return await client.start_workflow(
                LAUNCH_WORKFLOW,
                LaunchRequest(cluster_name=cluster, task=holding),
                id=f"launch:{cluster}:{uuid.uuid4().hex[:8]}",
                task_queue=WORKFLOW_QUEUE,
                result_type=LaunchResult,
            )

        async def until(predicate: Any) -> None:
            while not predicate(await record(client, cluster)):
                await asyncio.sleep(0.1)

        terminated = await start()
        await until(lambda r: r.holder is not None)
        await terminated.terminate("recording: a holder that runs no more code")
        await until(lambda r: r.holder is None)
        await start()
        await until(lambda r: r.holder is not None)
        await start()
        await until(lambda r: r.waiting)
        await down(client, cluster)

    with _real_server() as (server, _):
        asyncio.run(scenario(server.address))
        _save_real(server.address, cluster, name)


async def main() -> None:
    HISTORIES.mkdir(exist_ok=True)
    async with time_skipping() as env:
        await lifecycle(env.client)
    async with time_skipping() as env:
        await autostop(env.client, env.sleep)
    async with time_skipping() as env:
        await continue_as_new(env.client)


_REAL_SERVER = {"parallel_submits_worker_killed": parallel_submits_worker_killed, "lock_lease": lock_lease}
"""Scenarios recorded on a real dev server: ``python -m tests.cluster.record_histories NAME`` records one."""

if __name__ == "__main__":
    import sys

    # ``python -m tests.cluster.record_histories NAME`` records that one only.
    if sys.argv[1:] == ["lifecycle_watched"]:

        async def watched() -> None:
            async with time_skipping() as env:
                await lifecycle(env.client, "lifecycle_watched")

        asyncio.run(watched())
        sys.exit(0)
    if not sys.argv[1:]:
        asyncio.run(main())
    for scenario in sys.argv[1:] or _REAL_SERVER:
        _REAL_SERVER[scenario]()
