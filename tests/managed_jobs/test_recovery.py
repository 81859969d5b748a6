"""A managed job through preemptions, user failures and a provider API that does not answer (sim)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.managed_jobs import EndReason
from skyhop.providers.sim import SimCloud
from skyhop.spec import JobRecovery, Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for
from tests.managed_jobs.support import (
    alive,
    assert_replays,
    every_run_events,
    gate,
    job_log,
    open_gate,
    preempt_now,
    start_job,
    state_of,
    until_log,
    until_state,
)
from tests.providers.sim_support import write_plan

pytestmark = pytest.mark.integration


def _task(run_cmd: str, setup: str | None = None, **recovery: object) -> Task:
    return Task(
        run=run_cmd,
        setup=setup,
        resources=Resources(infra="sim", use_spot=True, job_recovery=JobRecovery(**recovery)),  # type: ignore[arg-type]
    )


def test_preempted_twice_then_succeeds_with_every_attempt_logged(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    write_plan(sim_catalog, [])
    task = _task(f'echo "attempt of $SKYHOP_TASK_ID"; {gate(tmp_path)}; echo finished')

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        # A short history: the job continues as new between its clusters, carrying its attempts.
        handle = await start_job(client, [task], history_limit=30)
        state = await state_of(handle)
        job_id, cluster = state.job_id, state.tasks[0].cluster_name
        first_run = (await handle.describe()).run_id
        most_alive = 0

        def watch() -> None:
            nonlocal most_alive  # the sim's API call also applies preemptions that are due
            most_alive = max(most_alive, len(alive(cluster)))

        until_log(job_id, 0, 1, "attempt of")
        preempt_now(cluster)
        await until_state(handle, lambda s: s.tasks[0].recoveries == 1, "the first preemption", each=watch)
        until_log(job_id, 0, 2, "attempt of")
        preempt_now(cluster)  # the third cluster is not preempted
        await until_state(handle, lambda s: s.tasks[0].recoveries == 2, "the second preemption", each=watch)
        until_log(job_id, 0, 3, "attempt of")
        await until_state(handle, lambda s: s.status == ManagedJobStatus.RUNNING, "the third run", each=watch)
        open_gate(tmp_path)
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED and final.end is not None
        assert final.end.reason == EndReason.SUCCEEDED
        attempts = final.tasks[0].attempts
        assert [a.outcome for a in attempts] == ["preempted", "preempted", "succeeded"]
        # EAGER_NEXT_REGION: each relaunch leaves the region that was just preempted.
        assert [a.region for a in attempts] == ["us-east-1", "us-east-2", "us-east-1"]
        assert most_alive == 1 and alive(cluster) == []
        task_id = final.tasks[0].task_id
        logs = [job_log(job_id, 0, n) for n in (1, 2, 3)]
        assert logs[:2] == [f"attempt of {task_id}\n"] * 2
        assert logs[2] == f"attempt of {task_id}\nfinished\n"
        assert (await handle.describe()).run_id != first_run
        await assert_replays(client, handle)

    run(scenario())


def test_failover_relaunches_in_the_preempted_region_first(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    write_plan(sim_catalog, [])
    task = _task(f"echo up; {gate(tmp_path)}", strategy="FAILOVER")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [task])
        state = await state_of(handle)
        cluster = state.tasks[0].cluster_name
        until_log(state.job_id, 0, 1, "up")
        preempt_now(cluster)
        await until_state(
            handle, lambda s: s.tasks[0].recoveries == 1, "the preemption", each=lambda: alive(cluster)
        )
        until_log(state.job_id, 0, 2, "up")
        open_gate(tmp_path)
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED
        assert [a.region for a in final.tasks[0].attempts] == ["us-east-1", "us-east-1"]

    run(scenario())


def test_a_preemption_is_decided_from_the_hubs_answer_with_no_probe_of_its_own(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    """The hub asks the provider with the end it signals: the job decides in that workflow task.

    Its own probe (an activity and a workflow task more) is only for a hub that got no answer
    (``test_a_status_api_that_fails_is_never_taken_for_a_preemption``). Each run's start has the
    hub follow it too, and sends the job's row: no activity of their own for the follow and the report.
    """
    write_plan(sim_catalog, [])
    task = _task(f"echo up; {gate(tmp_path)}")

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [task])
        state = await state_of(handle)
        until_log(state.job_id, 0, 1, "up")
        preempt_now(state.tasks[0].cluster_name)
        await until_state(handle, lambda s: s.tasks[0].recoveries == 1, "the preemption")
        until_log(state.job_id, 0, 2, "up")
        open_gate(tmp_path)
        final = await handle.result()
        assert [a.outcome for a in final.tasks[0].attempts] == ["preempted", "succeeded"]
        events = await every_run_events(client, handle.id)
        activities = [
            event.activity_task_scheduled_event_attributes.activity_type.name
            for event in events
            if event.HasField("activity_task_scheduled_event_attributes")
        ]
        assert activities.count("start_managed_run") == 2 and "probe_cluster" not in activities
        assert not {"start_job", "follow_run"} & set(activities)
        # The relaunch: the cluster's removal (with the RECOVERING row), a new cluster, its run's start
        # (with the RUNNING row); the job continues as new in the workflow task that heard the start.
        ended = next(
            i for i, e in enumerate(events) if e.HasField("workflow_execution_signaled_event_attributes")
        )
        continued = next(
            i
            for i, e in enumerate(events)
            if i > ended and e.HasField("workflow_execution_continued_as_new_event_attributes")
        )
        relaunch = events[ended:continued]
        assert [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in relaunch
            if e.HasField("activity_task_scheduled_event_attributes")
        ] == ["leave_cluster", "provision_attempt", "start_managed_run"]
        started = max(
            i for i, e in enumerate(relaunch) if e.HasField("activity_task_completed_event_attributes")
        )
        assert sum(e.HasField("workflow_task_completed_event_attributes") for e in relaunch[started:]) == 1

    run(scenario())


@pytest.mark.parametrize("restarts", [0, 1])
def test_a_user_failure_restarts_on_the_same_cluster_while_the_policy_allows(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path, restarts: int
) -> None:
    runs = tmp_path / "runs"
    task = _task(f"echo run >> {runs}; exit 3", max_restarts_on_errors=restarts)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        final = await (await start_job(client, [task])).result()
        assert final.status == ManagedJobStatus.FAILED and final.end is not None
        assert (final.end.reason, final.end.exit_code) == (EndReason.EXIT_CODE, 3)
        assert "exited with code 3" in final.end.message and "max_restarts_on_errors" in final.end.message
        state = final.tasks[0]
        assert (state.restarts, state.recoveries, len(state.attempts)) == (restarts, 0, restarts + 1)
        assert len({a.location for a in state.attempts}) == 1
        assert runs.read_text() == "run\n" * (restarts + 1)
        assert alive(state.cluster_name) == []

    run(scenario())


def test_a_restart_that_succeeds_ends_the_job_succeeded(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    first = tmp_path / "failed-once"
    task = _task(f"[ -e {first} ] || {{ touch {first}; exit 1; }}", max_restarts_on_errors=2)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        final = await (await start_job(client, [task])).result()
        assert final.status == ManagedJobStatus.SUCCEEDED
        assert [a.outcome for a in final.tasks[0].attempts] == ["exited with code 1, restarted", "succeeded"]
        assert final.tasks[0].restarts == 1

    run(scenario())


def test_an_exit_code_to_recover_on_gets_a_new_cluster_without_counting_a_restart(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    first = tmp_path / "failed-once"
    task = _task(f"[ -e {first} ] || {{ touch {first}; exit 42; }}", recover_on_exit_codes=[42])

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        final = await (await start_job(client, [task])).result()
        assert final.status == ManagedJobStatus.SUCCEEDED
        state = final.tasks[0]
        assert (state.recoveries, state.restarts) == (1, 0)
        assert [a.outcome for a in state.attempts] == [
            "exited with code 42, recovering on a new cluster",
            "succeeded",
        ]
        assert alive(state.cluster_name) == []

    run(scenario())


def test_a_status_api_that_fails_is_never_taken_for_a_preemption(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    """The run fails while the provider cannot be asked: the job waits, says why, and is not recovered."""
    task = _task(f"{gate(tmp_path)}; exit 5", max_restarts_on_errors=1)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [task])
        state = await until_state(handle, lambda s: s.status == ManagedJobStatus.RUNNING, "the run")
        cluster = state.tasks[0].cluster_name
        instances = alive(cluster)
        write_plan(sim_catalog, [{"call": "describe", "error": "transient"}])
        open_gate(tmp_path)
        waiting = await until_state(
            handle, lambda s: "could not ask sim" in (s.tasks[0].waiting or ""), "the probe to fail"
        )
        assert waiting.tasks[0].retry_at is not None and waiting.tasks[0].recoveries == 0
        await until_state(handle, lambda s: (s.tasks[0].waiting or "").count("asking again") == 1, "a retry")
        write_plan(sim_catalog, [])  # the API answers again: the nodes are up, the run failed
        assert [i["instance_id"] for i in SimCloud().describe(cluster)] == [
            i["instance_id"] for i in instances
        ]
        final = await handle.result()
        assert final.status == ManagedJobStatus.FAILED and final.end is not None
        assert final.end.exit_code == 5
        # The restart ran on the same nodes: nothing was torn down while the provider was silent.
        assert final.tasks[0].recoveries == 0 and final.tasks[0].restarts == 1
        assert {a.location for a in final.tasks[0].attempts} == {final.tasks[0].attempts[0].location}
        assert alive(cluster) == []

    run(scenario())


def test_preempted_during_setup_recovers_rather_than_failing_setup(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    write_plan(sim_catalog, [])
    marker = tmp_path / "first-setup"
    # The first cluster's setup waits until its node is taken; the next one's goes through.
    setup = f"if [ ! -e {marker} ]; then touch {marker}; {gate(tmp_path)}; fi"
    task = _task("echo ran", setup=setup)

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [task])
        cluster = (await state_of(handle)).tasks[0].cluster_name
        await until_state(handle, lambda s: marker.exists(), "the first setup")
        preempt_now(cluster)
        final = await until_state(
            handle, lambda s: s.status.done, "the job's end", each=lambda: alive(cluster)
        )
        assert final.status == ManagedJobStatus.SUCCEEDED, final.end
        assert [a.outcome for a in final.tasks[0].attempts] == ["preempted", "succeeded"]
        assert final.tasks[0].recoveries == 1 and job_log(final.job_id, 0, 2) == "ran\n"

    run(scenario())


def test_preempted_between_setup_and_run_recovers(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    """In a parallel group, a set-up task waits for the others' setups before its run starts: its
    nodes taken in that wait, starting the run finds them gone, and the task must recover."""
    write_plan(sim_catalog, [])
    spot = Resources(infra="sim", use_spot=True)
    tasks = [
        Task(name="a", setup="true", run="echo a-ran", resources=spot),
        Task(name="b", setup=gate(tmp_path), run="echo b-ran", resources=spot),
    ]

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, tasks, name="grp", parallel=True)
        cluster = (await state_of(handle)).tasks[0].cluster_name

        async def setups_done() -> int:
            scheduled: dict[int, str] = {}
            done = 0
            async for event in handle.fetch_history_events():
                if event.HasField("activity_task_scheduled_event_attributes"):
                    scheduled[event.event_id] = (
                        event.activity_task_scheduled_event_attributes.activity_type.name
                    )
                elif event.HasField("activity_task_completed_event_attributes"):
                    done += (
                        scheduled[event.activity_task_completed_event_attributes.scheduled_event_id]
                        == "run_setup"
                    )
            return done

        # Only task a's setup can end (b's waits at the gate): a waits for b's before its run starts.
        deadline = asyncio.get_running_loop().time() + 60
        while await setups_done() == 0:
            assert asyncio.get_running_loop().time() < deadline, "task a's setup did not end"
            await asyncio.sleep(0.1)
        preempt_now(cluster)
        open_gate(tmp_path)  # b's setup ends: a's run starts on its gone nodes
        final = await until_state(
            handle, lambda s: s.status.done, "the job's end", each=lambda: alive(cluster)
        )
        assert final.status == ManagedJobStatus.SUCCEEDED, final.end
        assert [a.outcome for a in final.tasks[0].attempts] == ["preempted", "succeeded"]
        assert job_log(final.job_id, 0, 2) == "a-ran\n" and job_log(final.job_id, 1, 1) == "b-ran\n"
        await assert_replays(client, handle)

    run(scenario())
