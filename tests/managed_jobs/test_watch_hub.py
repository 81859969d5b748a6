"""Watch hubs: many running jobs, few activities; ends delivered at least once, handled once."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from skyhop.activities.models import AttemptLog, FollowedRun, FollowSet, WatchedJob, WatchHubInput
from skyhop.cli.failures import asked_again
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.job_index import ManagedJobStatus, managed_job_workflow_id
from skyhop.contract.managed_jobs import ManagedJobState
from skyhop.contract.watch_hub import (
    RUN_ENDED_SIGNAL,
    WATCH_HUB_SHARDS,
    WatchHubQuery,
    WatchHubSignal,
    run_key,
    watch_hub_shard,
    watch_hub_workflow_id,
)
from skyhop.spec import Resources, Task
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess, until_true, wait_for
from tests.integration.support import client_for
from tests.managed_jobs.support import (
    alive,
    every_run_events,
    gate,
    job_log,
    next_job_id,
    open_gate,
    start_job,
    state_of,
    until_log,
    until_reports_settled,
    until_state,
)

pytestmark = pytest.mark.integration

KILL_ROUNDS = 3
HUB_HISTORY_LIMIT = 40
"""The test hub's history limit, and how many runs that end at once it is asked to follow."""


def _task(folder: Path, after: str = "") -> Task:
    return Task(run=f"echo before; {gate(folder)}; echo after{after}", resources=Resources(infra="sim"))


def _running(state: ManagedJobState) -> bool:
    return state.status == ManagedJobStatus.RUNNING


async def _run_ended_signals(client: Client, workflow_id: str) -> int:
    """How many ``run_ended`` signals the owner's history holds (every run of it)."""
    count = 0
    for event in await every_run_events(client, workflow_id):
        if (
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and event.workflow_execution_signaled_event_attributes.signal_name == RUN_ENDED_SIGNAL
        ):
            count += 1
    return count


async def _followed(client: Client, hub_id: str, *since: int) -> FollowSet:
    handle = client.get_workflow_handle(hub_id)
    follow: FollowSet = await asked_again(
        lambda: handle.query(WatchHubQuery.FOLLOWED.value, *since, result_type=FollowSet)
    )
    return follow


async def _run_of(client: Client, hub_id: str, owner: str) -> FollowedRun:
    """The run ``owner`` follows on the hub, once it does (a job shows RUNNING just before)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        with contextlib.suppress(RPCError):  # the first follow starts the hub
            runs = [r for r in (await _followed(client, hub_id)).runs if r.owner == owner]
            if runs:
                return runs[0]
        if loop.time() > deadline:
            raise AssertionError(f"{owner} is not followed on {hub_id} after 60 s")
        await asyncio.sleep(0.2)


async def _watcher_attempt(client: Client, hub_id: str) -> int:
    """The attempt of the hub's pending ``watch_followed`` activity (0: none pending)."""
    pending = (await client.get_workflow_handle(hub_id).describe()).raw_description.pending_activities
    return max((a.attempt for a in pending if a.activity_type.name == "watch_followed"), default=0)


def _ids_in_two_shards(count: int) -> list[int]:
    """Unique job ids that fall in two shards only."""
    first = next_job_id()
    shards = {watch_hub_shard(first), (watch_hub_shard(first) + 1) % WATCH_HUB_SHARDS}
    ids = [first]
    while len(ids) < count:
        job_id = next_job_id()
        if watch_hub_shard(job_id) in shards:
            ids.append(job_id)
    return ids


def test_twenty_running_jobs_are_followed_by_at_most_one_activity_per_shard(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        ids = _ids_in_two_shards(20)
        handles = [await start_job(client, [_task(tmp_path)], job_id=job_id) for job_id in ids]
        for handle in handles:
            await until_state(handle, _running, f"{handle.id} running", timeout=240)
        for job_id, handle in zip(ids, handles, strict=True):
            await _run_of(client, watch_hub_workflow_id(watch_hub_shard(job_id)), handle.id)
        hubs = sorted({watch_hub_workflow_id(watch_hub_shard(job_id)) for job_id in ids})
        assert len(hubs) == 2
        pending = 0
        for hub in hubs:
            description = await client.get_workflow_handle(hub).describe()
            pending += len(description.raw_description.pending_activities)
        assert pending <= len(hubs), f"{pending} activities follow 20 jobs"
        for hub in hubs:  # asked since a version, a hub sends the runs followed and forgotten after it
            whole = await _followed(client, hub)
            assert whole.keys is None and whole.forgotten is None and len(whole.runs) >= 2
            keys = sorted(run.key for run in whole.runs)
            unchanged = await _followed(client, hub, whole.version)
            assert (unchanged.runs, unchanged.forgotten, unchanged.keys) == ([], [], None)
            since_start = await _followed(client, hub, 0)
            assert sorted(run.key for run in since_start.runs) == keys and since_start.keys is None
            assert not set(since_start.forgotten or []) & set(keys)
        for handle in handles:
            await until_reports_settled(handle)  # nothing pending but a report, and that one ends
        open_gate(tmp_path)
        for handle in handles:
            final = await asyncio.wait_for(handle.result(), 120)
            assert final.status == ManagedJobStatus.SUCCEEDED, final
        owners = {h.id for h in handles}

        async def forgotten() -> bool:
            """Whether the hubs forgot the ended runs (told with their activity's next question)."""
            for hub in hubs:
                if {r.owner for r in (await _followed(client, hub)).runs} & owners:
                    return False
            return True

        await until_true(forgotten, "the hubs to forget the ended runs")

    run(scenario())


def test_an_end_reaches_its_owner_once_across_a_hub_activity_retried_after_kill9(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        for round_ in range(KILL_ROUNDS):
            folder = tmp_path / f"round-{round_}"
            folder.mkdir()
            handle = await start_job(client, [_task(folder)])
            state = await until_state(handle, _running, f"round {round_}: running", timeout=120)
            job_id, cluster = state.job_id, state.tasks[0].cluster_name
            hub = watch_hub_workflow_id(watch_hub_shard(job_id))
            until_log(job_id, 0, 1, "before")
            before = await _watcher_attempt(client, hub)
            live_worker.kill9()
            live_worker.start()

            async def retried(h: str = hub, b: int = before) -> bool:
                return await _watcher_attempt(client, h) > b

            await until_true(retried, f"round {round_}: the hub's activity retried", timeout=90)
            open_gate(folder)
            try:
                final = await asyncio.wait_for(handle.result(), 120)
            except TimeoutError:
                raise AssertionError(f"round {round_}: {await state_of(handle)}") from None
            assert final.status == ManagedJobStatus.SUCCEEDED, f"round {round_}: {final}"
            assert [a.outcome for a in final.tasks[0].attempts] == ["succeeded"], f"round {round_}"
            assert final.tasks[0].restarts == 0 and final.tasks[0].recoveries == 0, f"round {round_}"
            assert job_log(job_id, 0, 1) == "before\nafter\n", f"round {round_}"
            assert await _run_ended_signals(client, handle.id) >= 1, f"round {round_}"
            assert alive(cluster) == [], f"round {round_}"

    run(scenario())


def test_a_forgotten_run_is_not_signalled(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        first, second = _ids_in_two_shards(1)[0], next_job_id()
        while watch_hub_shard(second) != watch_hub_shard(first):
            second = next_job_id()
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        forgotten = await start_job(
            client, [_task(tmp_path / "a", f"; touch {tmp_path / 'a-done'}")], job_id=first
        )
        other = await start_job(client, [_task(tmp_path / "b")], job_id=second)
        for handle in (forgotten, other):
            await until_state(handle, _running, f"{handle.id} running", timeout=120)
        until_log(first, 0, 1, "before")
        hub = client.get_workflow_handle(watch_hub_workflow_id(watch_hub_shard(first)))
        run_a = await _run_of(client, hub.id, forgotten.id)
        assert run_a.key == run_key(managed_job_workflow_id(first), 0, 1)
        # Forgotten from another process than the hub's activity (this one): the activity takes it
        # at its next question to the hub, which also brings a run followed after it. That run is a
        # probe on the same job (an owner that does not exist, a log stream of its own): its output
        # shipped says the activity asked the hub since the forget.
        await hub.signal(WatchHubSignal.FORGET.value, [run_a.key])
        probe_id = next_job_id()
        probe = run_a.model_copy(
            update={
                "key": f"{run_a.key}/probe",
                "owner": managed_job_workflow_id(probe_id),
                "log": AttemptLog(job_id=probe_id, task_index=0, attempt=1),
            }
        )
        await hub.signal(WatchHubSignal.FOLLOW.value, probe)
        until_log(probe_id, 0, 1, "before", timeout=120)
        open_gate(tmp_path / "a")
        wait_for(lambda: (tmp_path / "a-done").exists(), 60, "the forgotten run to end")
        # The other run's end comes from a cycle after the forgotten run ended: it was not asked.
        open_gate(tmp_path / "b")
        final = await asyncio.wait_for(other.result(), 120)
        assert final.status == ManagedJobStatus.SUCCEEDED, final
        assert (await state_of(forgotten)).status == ManagedJobStatus.RUNNING
        assert await _run_ended_signals(client, forgotten.id) == 0
        assert "after" not in job_log(first, 0, 1), "a forgotten run's output is not shipped"
        await forgotten.cancel()
        cancelled = await asyncio.wait_for(forgotten.result(), 120)
        assert cancelled.status == ManagedJobStatus.CANCELLED

    run(scenario())


def test_the_hub_continues_as_new_and_keeps_following(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        owner = await start_job(client, [_task(tmp_path)])
        state = await until_state(owner, _running, "running", timeout=120)
        job_id = state.job_id
        shard_hub = watch_hub_workflow_id(watch_hub_shard(job_id))
        real = await _run_of(client, shard_hub, owner.id)
        # The run moves to a hub of the test's own with a short history, which also follows runs
        # that end at once (no record on the node: each a follow, an end and a forget). Each follow
        # is one event at least, however the worker batches the signals into workflow tasks (one
        # task for all of them when it is busy), so the follows alone reach the limit.
        await client.get_workflow_handle(shard_hub).signal(WatchHubSignal.FORGET.value, [real.key])
        hub: WorkflowHandle[object, None] = await client.start_workflow(
            WorkflowType.WATCH_HUB,
            WatchHubInput(history_limit=HUB_HISTORY_LIMIT),
            id=f"job-watch:test-{job_id}",
            task_queue=WORKFLOW_QUEUE,
            start_signal=WatchHubSignal.FOLLOW.value,
            start_signal_args=[real],
        )
        first_run = (await hub.describe()).run_id
        dummy_log = AttemptLog(job_id=next_job_id(), task_index=0, attempt=1)
        for number in range(HUB_HISTORY_LIMIT):
            dummy = FollowedRun(
                key=f"{real.key}/dummy-{number}",
                owner=owner.id,
                handle=real.handle,
                job=WatchedJob(job_id=1_000 + number, nodes=[0], running=True),
                log=dummy_log,
            )
            await hub.signal(WatchHubSignal.FOLLOW.value, dummy)

        async def continued() -> bool:
            return (await hub.describe()).run_id != first_run

        await until_true(continued, "the hub to continue as new")

        async def dummies_gone() -> bool:
            return [r.key for r in (await _followed(client, hub.id)).runs] == [real.key]

        await until_true(dummies_gone, "the dummy runs to end and be forgotten")
        open_gate(tmp_path)
        final = await asyncio.wait_for(owner.result(), 120)
        assert final.status == ManagedJobStatus.SUCCEEDED, final
        assert [a.outcome for a in final.tasks[0].attempts] == ["succeeded"]
        assert job_log(job_id, 0, 1) == "before\nafter\n"

        async def forgotten() -> bool:
            return not (await _followed(client, hub.id)).runs

        await until_true(forgotten, "the new run to forget the run it saw end")
        await hub.cancel()

    run(scenario())
