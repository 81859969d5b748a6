"""A job group with ``primary_tasks``: once the primary tasks ended, the auxiliary ones are stopped
after their ``termination_delay`` (a durable timer), their clusters removed, and the job's status is
the primary tasks'. With ``inter_connection``, runs know the group's name; sim nodes share this
machine's ``/etc/hosts``, which stays untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle

from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.managed_jobs import EndReason, ManagedJobState
from skyhop.contract.search import STATUS
from skyhop.spec import JobGroup, Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for
from tests.managed_jobs.support import alive, assert_replays, gate, job_log, start_job

pytestmark = pytest.mark.integration

SIM = Resources(infra="sim")
DELAY_S = 2.0


def test_the_auxiliary_task_is_stopped_after_the_delay_and_the_group_succeeds(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    tasks = [
        # The primary task ends once the auxiliary one runs; the auxiliary one never ends by itself.
        Task(
            name="a",
            run=f"{gate(tmp_path, 'b-running')}; echo trained in $SKYHOP_JOBGROUP_NAME",
            resources=SIM,
        ),
        Task(name="b", run=f"touch {tmp_path}/b-running; {gate(tmp_path, 'never')}", resources=SIM),
    ]
    group = JobGroup(
        primary_tasks=["a"], termination_delays={"default": DELAY_S}, inter_connection=True, name="g"
    )
    hosts_before = Path("/etc/hosts").read_text()

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, tasks, parallel=True, group=group)
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED and final.end is not None, final
        assert job_log(final.job_id, 0, 1) == "trained in g\n"
        assert Path("/etc/hosts").read_text() == hosts_before
        assert final.end.message == "the primary tasks (a) succeeded"
        a, b = final.tasks
        assert a.primary and not b.primary
        assert b.status == ManagedJobStatus.CANCELLED and b.end is not None
        assert b.end.reason == EndReason.PRIMARY_TASKS_ENDED
        assert b.end.message == "stopped 2s after the group's primary tasks ended (termination_delay)"
        a_ended, b_stopped = a.attempts[-1].ended_at, b.attempts[-1].ended_at
        assert a_ended is not None and b_stopped is not None and b_stopped - a_ended >= DELAY_S
        assert b.attempts[-1].outcome == "stopped"
        assert final.summary().primary_tasks == ["a"]
        assert all(alive(t.cluster_name) == [] for t in final.tasks)
        assert await published_statuses(handle) == ["PENDING", "STARTING", "RUNNING", "SUCCEEDED"]
        await assert_replays(client, handle)

    run(scenario())


async def published_statuses(handle: WorkflowHandle[object, ManagedJobState]) -> list[str]:
    """The job's statuses as its ``SkyhopStatus`` search attribute said them, in order: stopping the
    auxiliary task never showed the job as CANCELLING."""
    said = []
    async for event in handle.fetch_history_events():
        if event.HasField("upsert_workflow_search_attributes_event_attributes"):
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            if STATUS.name in fields:
                said.append(json.loads(fields[STATUS.name].data))
    return said


def test_a_failed_primary_task_fails_the_group_and_stops_the_others_at_once(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    tasks = [
        Task(name="a", run=f"{gate(tmp_path, 'b-running')}; exit 4", resources=SIM),
        Task(name="b", run=f"touch {tmp_path}/b-running; {gate(tmp_path, 'never')}", resources=SIM),
    ]
    # A delay far beyond the test's time: a failure does not wait for it.
    group = JobGroup(primary_tasks=["a"], termination_delays={"default": 3600.0}, name="g")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, tasks, parallel=True, group=group)
        final = await handle.result()
        assert final.status == ManagedJobStatus.FAILED and final.end is not None, final
        assert final.end.exit_code == 4
        b = final.tasks[1]
        assert b.status == ManagedJobStatus.CANCELLED and b.end is not None
        assert b.end.reason == EndReason.EARLIER_TASK
        assert all(alive(t.cluster_name) == [] for t in final.tasks)
        await assert_replays(client, handle)

    run(scenario())
