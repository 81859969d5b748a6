"""A managed job's lifecycle on sim: cancel in each phase, pipelines, parallel groups, what it publishes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from skyhop.cli.embedded import temporal_binary
from skyhop.contract import WorkflowKind
from skyhop.contract.job_index import MEMO_KEY, ManagedJobStatus, ManagedJobSummary, managed_job_workflow_id
from skyhop.contract.managed_jobs import EndReason, ManagedJobState
from skyhop.contract.search import KIND, NAME, STATUS, USER
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for, decrypted, payload_mac
from tests.managed_jobs.support import (
    alive,
    assert_replays,
    gate,
    job_log,
    next_job_id,
    open_gate,
    preempt_now,
    start_job,
    state_of,
    until_log,
    until_reports_settled,
    until_state,
)
from tests.providers.sim_support import write_plan

pytestmark = pytest.mark.integration

SIM = Resources(infra="sim")


@pytest.mark.parametrize(
    "phase", [ManagedJobStatus.STARTING, ManagedJobStatus.RUNNING, ManagedJobStatus.RECOVERING]
)
def test_cancel_leaves_no_instance(
    temporal_server: DevServer,
    live_worker: WorkerProcess,
    sim_catalog: Path,
    tmp_path: Path,
    phase: ManagedJobStatus,
) -> None:
    marker = tmp_path / "set-up-once"
    task: Task
    if phase == ManagedJobStatus.STARTING:
        task = Task(setup=gate(tmp_path), run="true", resources=SIM)
    elif phase == ManagedJobStatus.RUNNING:
        task = Task(run=gate(tmp_path), resources=SIM)
    else:
        # Preempted while running; the second cluster's setup then waits: the job is RECOVERING.
        write_plan(sim_catalog, [])
        setup = f"if [ -e {marker} ]; then {gate(tmp_path)}; fi; touch {marker}"
        task = Task(setup=setup, run=gate(tmp_path), resources=SIM)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [task])
        cluster = (await state_of(handle)).tasks[0].cluster_name

        if phase == ManagedJobStatus.RECOVERING:
            # Preempted while its run waits at the gate; the next cluster's setup then waits.
            await until_state(handle, lambda s: s.status == ManagedJobStatus.RUNNING, "the first run")
            preempt_now(cluster)

        def in_phase(state: ManagedJobState) -> bool:
            # RECOVERING: once the second cluster is up (its setup waits), so the cancel must remove it.
            second_up = len(state.tasks[0].attempts) == 2 and state.tasks[0].attempts[1].location is not None
            return state.status == phase and (phase != ManagedJobStatus.RECOVERING or second_up)

        # Polling the sim's API also applies the preemption once it is due.
        await until_state(handle, in_phase, f"the job {phase}", each=lambda: alive(cluster))
        await handle.cancel()
        final = await handle.result()
        assert final.status == ManagedJobStatus.CANCELLED and final.end is not None
        assert final.end.reason == EndReason.CANCELLED
        assert final.tasks[0].attempts[-1].outcome == "cancelled"
        assert alive(cluster) == []
        await assert_replays(client, handle)

    run(scenario())


def test_a_pipeline_runs_its_tasks_in_order_each_on_its_own_cluster(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    order = tmp_path / "order"
    tasks = [
        Task(name=f"step{i}", run=f"echo step{i} >> {order}; echo out-$SKYHOP_TASK_ID", resources=SIM)
        for i in range(3)
    ]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, tasks, name="pipe")
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED
        assert [t.status for t in final.tasks] == [ManagedJobStatus.SUCCEEDED] * 3
        assert order.read_text() == "step0\nstep1\nstep2\n"
        names = [t.cluster_name for t in final.tasks]
        assert names == [f"job-{final.job_id}-{i}" for i in range(3)]
        for index, task in enumerate(final.tasks):
            assert job_log(final.job_id, index, 1) == f"out-{task.task_id}\n"
            assert alive(task.cluster_name) == []
        # What a listing reads, with no query: the status attribute and the memo's summary.
        described = await handle.describe()
        attributes = described.typed_search_attributes
        assert attributes.get(STATUS) == ManagedJobStatus.SUCCEEDED.value
        assert (attributes.get(KIND), attributes.get(NAME), attributes.get(USER)) == (
            WorkflowKind.MANAGED_JOB.value,
            "pipe",
            "tester",
        )
        summary = await described.memo_value(MEMO_KEY, type_hint=ManagedJobSummary)
        assert summary.status == ManagedJobStatus.SUCCEEDED and summary.ended_at is not None

    run(scenario())


def test_a_failed_pipeline_task_cancels_the_rest(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    tasks = [
        Task(run="true", resources=SIM),
        Task(run="exit 7", resources=SIM),
        Task(run=f"touch {ran}", resources=SIM),
    ]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        final = await (await start_job(client, tasks)).result()
        assert final.status == ManagedJobStatus.FAILED and final.end is not None
        assert final.end.exit_code == 7
        assert [t.status for t in final.tasks] == [
            ManagedJobStatus.SUCCEEDED,
            ManagedJobStatus.FAILED,
            ManagedJobStatus.CANCELLED,
        ]
        assert final.tasks[2].end is not None and final.tasks[2].end.reason == EndReason.EARLIER_TASK
        assert final.tasks[2].attempts == [] and not ran.exists()

    run(scenario())


def test_a_parallel_group_runs_at_once_and_each_task_knows_the_others(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    both = '[ -n "$SKYHOP_JOBGROUP_HEAD_IPS" ] && [ -n "$SKYHOP_JOBGROUP_WORKER_1_IPS" ]'
    # Each run waits until the other has started: they run at once.
    tasks = [
        Task(
            name="head",
            run=f"{both} && echo head sees $SKYHOP_JOBGROUP_WORKER_1_IPS; touch {tmp_path}/head; "
            + gate(tmp_path, "worker"),
            resources=SIM,
        ),
        Task(
            name="worker-1",
            run=f"{both} && echo worker sees $SKYHOP_JOBGROUP_HEAD_IPS; touch {tmp_path}/worker; "
            + gate(tmp_path, "head"),
            resources=SIM,
        ),
    ]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, tasks, parallel=True)
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED, final
        assert job_log(final.job_id, 0, 1) == "head sees 127.0.0.1\n"
        assert job_log(final.job_id, 1, 1) == "worker sees 127.0.0.1\n"
        assert all(alive(t.cluster_name) == [] for t in final.tasks)
        await assert_replays(client, handle)

    run(scenario())


def test_a_failure_in_a_parallel_group_cancels_the_others(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    tasks = [
        Task(name="fails", run=f"{gate(tmp_path, 'other-running')}; exit 9", resources=SIM),
        Task(name="waits", run=f"touch {tmp_path}/other-running; {gate(tmp_path)}", resources=SIM),
    ]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, tasks, parallel=True)
        final = await handle.result()
        assert final.status == ManagedJobStatus.FAILED and final.end is not None
        assert final.end.exit_code == 9
        waits = final.tasks[1]
        assert waits.status == ManagedJobStatus.CANCELLED and waits.end is not None
        assert waits.end.reason == EndReason.EARLIER_TASK
        assert all(alive(t.cluster_name) == [] for t in final.tasks)
        await assert_replays(client, handle)

    run(scenario())


def test_the_temporal_cli_starts_a_managed_job_with_signed_json(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path
) -> None:
    """The README's contract: any Temporal client that holds the key starts a managed job with JSON."""
    job_id = next_job_id()
    request = {
        "job_id": job_id,
        "name": "from-json",
        "tasks": [{"run": "echo json", "resources": {"infra": "sim"}}],
    }
    data = json.dumps(request)
    out = subprocess.run(
        [
            temporal_binary(), "workflow", "execute", "--address", temporal_server.address,
            "--type", "ManagedJobWorkflow", "--task-queue", "skyhop-workflows",
            "--workflow-id", managed_job_workflow_id(job_id), "--input", data, "-o", "json",
            "--input-meta", f"skyhop-mac={payload_mac(data)}",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = decrypted(json.loads(out.stdout)["result"])
    assert (result["status"], result["end"]["reason"]) == ("SUCCEEDED", "succeeded")
    assert job_log(job_id, 0, 1) == "json\n"


def test_a_running_job_writes_nothing_to_its_history(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    """No timer and no activity (its watch hub follows it): a job's history stands still while it
    runs, and is only its continued run's first workflow task (it continued as new once followed)."""
    task = Task(run=f"echo a; {gate(tmp_path, 'b')}; echo b; {gate(tmp_path)}", resources=SIM)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [task])
        state = await until_state(handle, lambda s: s.status == ManagedJobStatus.RUNNING, "the run")
        until_log(state.job_id, 0, 1, "a\n")

        await until_reports_settled(handle)
        before = (await handle.describe()).raw_description.workflow_execution_info.history_length
        # Started; a workflow task scheduled, started and completed. No baseline patch's marker
        # and search attribute: the run carries the baseline (``workflows.changes``).
        assert before == 4
        async for event in handle.fetch_history_events():
            assert not event.HasField("marker_recorded_event_attributes"), event
        open_gate(tmp_path, "b")
        until_log(state.job_id, 0, 1, "b\n")  # the watcher polled on, and shipped the new output
        after = (await handle.describe()).raw_description.workflow_execution_info.history_length
        assert after == before
        open_gate(tmp_path)
        assert (await handle.result()).status == ManagedJobStatus.SUCCEEDED
        # PENDING and STARTING come in the job's first workflow task: one report carries both.
        first_run = client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
        assert await _reports_before_running(first_run) == 1

    run(scenario())


async def _reports_before_running(handle: WorkflowHandle[Any, Any]) -> int:
    """How many ``index_job_row`` reports the job sent before it wrote RUNNING."""
    reports = 0
    async for event in handle.fetch_history_events():
        status = (
            event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields.get(
                STATUS.name
            )
        )
        if status is not None and json.loads(status.data) == ManagedJobStatus.RUNNING:
            break
        reports += event.activity_task_scheduled_event_attributes.activity_type.name == "index_job_row"
    return reports


def test_a_setup_that_fails_ends_the_job_failed_setup(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    task = Task(setup="echo broken; exit 4", run=f"touch {ran}", resources=SIM)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        final = await (await start_job(client, [task])).result()
        assert final.status == ManagedJobStatus.FAILED_SETUP and final.end is not None
        assert final.end.reason == EndReason.SETUP and "exit code 4" in final.end.message
        assert final.tasks[0].attempts[0].outcome == "setup failed" and not ran.exists()
        assert alive(final.tasks[0].cluster_name) == []

    run(scenario())


def test_a_preempted_task_of_a_parallel_group_recovers_alone(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    write_plan(sim_catalog, [])
    tasks = [
        Task(name="spot", run=f"echo peer $SKYHOP_JOBGROUP_STEADY_IPS; {gate(tmp_path)}", resources=SIM),
        Task(name="steady", run=gate(tmp_path), resources=Resources(infra="sim/us-west-2")),
    ]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, tasks, parallel=True)
        state = await state_of(handle)
        clusters = [t.cluster_name for t in state.tasks]
        until_log(state.job_id, 0, 1, "peer 127.0.0.1")
        preempt_now(clusters[0])
        await until_state(
            handle, lambda s: s.tasks[0].recoveries == 1, "the preemption", each=lambda: alive(clusters[0])
        )
        until_log(state.job_id, 0, 2, "peer 127.0.0.1")
        open_gate(tmp_path)
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED, final.end
        assert [t.recoveries for t in final.tasks] == [1, 0]
        assert [len(t.attempts) for t in final.tasks] == [2, 1]
        assert all(alive(cluster) == [] for cluster in clusters)

    run(scenario())


def test_a_task_without_run_succeeds_once_set_up(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        final = await (
            await start_job(client, [Task(setup=f"touch {tmp_path}/set-up", resources=SIM)])
        ).result()
        assert final.status == ManagedJobStatus.SUCCEEDED and (tmp_path / "set-up").exists()
        assert alive(final.tasks[0].cluster_name) == []

    run(scenario())
