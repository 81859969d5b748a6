"""``skyhop jobs queue|cancel|logs`` as a user runs them, against the session's server and worker.

The jobs are stand-ins (``tests.managed_jobs.fakes``) with a real job's id, search attributes,
memo and job-index row, and log-store files the test writes, so these hold whatever
``ManagedJobWorkflow`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from skyhop.contract.job_index import ManagedJobStatus
from skyhop.contract.managed_jobs import ManagedJobState
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for
from tests.managed_jobs.fakes import (
    SET_STATE,
    ScriptedJob,
    allocated_ids,
    fake_job_id,
    start_listed,
    user_env,
)
from tests.managed_jobs.support import attempt, job_state, write_attempt

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def _state(job_id: int, user: str, name: str, status: ManagedJobStatus, age_s: float = 0) -> ManagedJobState:
    state = job_state(job_id, [[attempt(1)]], status)
    return state.model_copy(update={"user": user, "name": name, "submitted_at": time.time() - age_s})


async def _terminate(handles: list[WorkflowHandle[object, object]]) -> None:
    for handle in handles:
        with contextlib.suppress(RPCError):  # already ended
            await handle.terminate("test over")


async def _until_listed(client: Client, query: str, count: int) -> None:
    deadline = time.monotonic() + 60
    while (await client.count_workflows(query)).count != count:  # visibility lags the starts a little
        assert time.monotonic() < deadline, f"visibility never listed {count} for {query}"
        await asyncio.sleep(0.1)


def test_queue_lists_from_the_index_newest_first_for_the_user_or_everyone(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    env, user = user_env(cli_env)

    async def start() -> list[WorkflowHandle[object, object]]:
        client = await client_for(temporal_server.address)
        ids = iter(await allocated_ids(client, 5))
        states = [
            _state(next(ids), user, "old", ManagedJobStatus.SUCCEEDED, age_s=600),
            _state(next(ids), user, "mid", ManagedJobStatus.RECOVERING, age_s=300),
            _state(next(ids), user, "new", ManagedJobStatus.PENDING),
            _state(next(ids), "someone-else-" + user, "theirs", ManagedJobStatus.RUNNING),
            _state(next(ids), user, "killed", ManagedJobStatus.RUNNING, age_s=900),
        ]
        handles = [await start_listed(client, state) for state in states]
        await handles[-1].terminate("an operator terminated it: its memo still says RUNNING")
        await _until_listed(client, f"SkyhopUser = '{user}'", 4)
        return handles

    handles = run(start())
    try:
        queue = skyhop("jobs", "queue", env=env)
        assert queue.returncode == 0, queue.stderr
        header, *rows = queue.stdout.splitlines()
        assert header.split("  ")[0] == "ID" and "TOTAL DURATION" in header and "#RECOVERIES" in header
        by_name = {row.split()[1]: row.split()[-1] for row in rows}
        assert [row.split()[1] for row in rows] == [
            "killed",
            "new",
            "mid",
            "old",
        ]  # newest (highest id) first
        assert by_name == {"killed": "FAILED", "new": "PENDING", "mid": "RECOVERING", "old": "SUCCEEDED"}
        assert "1x[any]" in rows[2]

        active = skyhop("jobs", "queue", "--skip-finished", "--json", env=env)
        assert active.returncode == 0, active.stderr
        document = json.loads(active.stdout)
        assert document["kind"] == "managed_jobs"
        assert [item["name"] for item in document["items"]] == ["new", "mid"]
        assert {item["user"] for item in document["items"]} == {user}

        everyone = json.loads(skyhop("jobs", "queue", "-a", "--json", env=env).stdout)["items"]
        assert "theirs" in [item["name"] for item in everyone]
    finally:
        run(_terminate(handles))


def test_cancel_by_id_name_and_all_says_what_was_cancelled_and_what_had_ended(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    env, user = user_env(cli_env)

    async def start() -> list[WorkflowHandle[object, object]]:
        client = await client_for(temporal_server.address)
        ids = await allocated_ids(client, 5)
        states = [_state(job_id, user, "a", ManagedJobStatus.RUNNING) for job_id in ids[:3]]
        states += [_state(job_id, user, "b", ManagedJobStatus.RUNNING) for job_id in ids[3:]]
        handles = [await start_listed(client, state) for state in states]
        await handles[2].terminate("ended before the cancel")
        await _until_listed(client, f"SkyhopUser = '{user}' AND ExecutionStatus = 'Running'", 4)
        return handles

    async def cancel_requested(handle: WorkflowHandle[object, object]) -> bool:
        events = [e async for e in handle.fetch_history_events()]
        return any(e.HasField("workflow_execution_cancel_requested_event_attributes") for e in events)

    handles = run(start())
    ids = [int(h.id.rsplit(":", 1)[1]) for h in handles]
    try:
        unknown = fake_job_id()
        by_id = skyhop("jobs", "cancel", str(ids[0]), str(ids[1]), str(ids[2]), str(unknown), env=env)
        assert by_id.returncode == 1, by_id.stderr
        assert by_id.stderr.splitlines() == [
            f"Cancelling managed job(s) {ids[0]}-{ids[1]}: each ends CANCELLED once its clusters are gone.",
            f"Managed job(s) {ids[2]} had already ended.",
            f"Error: no managed job(s) {unknown}; see: skyhop jobs queue",
        ]
        assert run(cancel_requested(handles[0])) and run(cancel_requested(handles[1]))
        assert not run(cancel_requested(handles[3]))
        # The stand-ins never get to their cancel: the index shows it from the command's mark.
        listed = json.loads(skyhop("jobs", "queue", "--json", env=env).stdout)["items"]
        assert {item["job_id"]: item["status"] for item in listed} == {
            ids[0]: "CANCELLING",
            ids[1]: "CANCELLING",
            ids[2]: "FAILED",
            ids[3]: "RUNNING",
            ids[4]: "RUNNING",
        }

        by_name = skyhop("jobs", "cancel", "-n", "b", "-y", env=env)
        assert by_name.returncode == 0, by_name.stderr
        assert f"Cancelling managed job(s) {ids[3]}-{ids[4]}:" in by_name.stderr
        assert run(cancel_requested(handles[4]))

        nobody = skyhop("jobs", "cancel", "-n", "never-submitted", "-y", env=env)
        assert nobody.returncode == 0 and "No running managed jobs named 'never-submitted'." in nobody.stderr

        everything = skyhop(
            "jobs", "cancel", "--all", "-y", env=env
        )  # a cancelled job still runs its cleanup
        assert everything.returncode == 0, everything.stderr
        assert f"Cancelling managed job(s) {ids[0]}-{ids[1]}, {ids[3]}-{ids[4]}:" in everything.stderr
    finally:
        run(_terminate(handles))


@asynccontextmanager
async def _scripted(client: Client) -> AsyncIterator[str]:
    """A worker running ``ScriptedJob`` on a task queue of its own, for the block."""
    queue = f"scripted-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[ScriptedJob]):
        yield queue


def test_logs_show_every_attempt_in_order_with_recovery_markers_and_an_unknown_id_is_one_line(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        job = job_state(
            fake_job_id(),
            [
                [
                    attempt(1, outcome="preempted"),
                    attempt(2, location="sim/r2/r2a", outcome="preempted"),
                    attempt(3),
                ]
            ],
            ManagedJobStatus.RUNNING,
        )
        for number, text in ((1, "step 1\nstep 2\n"), (2, "resumed at 2\n"), (3, "resumed at 2\ndone\n")):
            write_attempt(job.job_id, 0, number, text)
        async with _scripted(client) as queue:
            await start_listed(client, job, queue)
            shown = await asyncio.to_thread(skyhop, "jobs", "logs", str(job.job_id), env=cli_env)
            assert shown.returncode == 0, shown.stderr
            assert shown.stdout.splitlines() == [
                "step 1",
                "step 2",
                "--- recovery 1: attempt 2 on sim/r2/r2a (previous attempt: preempted) ---",
                "resumed at 2",
                "--- recovery 2: attempt 3 on sim/r1/r1a (previous attempt: preempted) ---",
                "resumed at 2",
                "done",
            ]
            missing = await asyncio.to_thread(skyhop, "jobs", "logs", str(fake_job_id()), env=cli_env)
            assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
            assert "no managed job" in missing.stderr and "Traceback" not in missing.stderr
            await client.get_workflow_handle(f"managed-job:{job.job_id}").terminate("test over")

    run(scenario())


def test_logs_follow_tails_the_current_attempt_through_a_recovery_until_the_job_ends(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        job = job_state(fake_job_id(), [[attempt(1)]], ManagedJobStatus.RUNNING)
        async with _scripted(client) as queue:
            handle = await start_listed(client, job, queue)
            follow = asyncio.create_task(
                asyncio.to_thread(skyhop, "jobs", "logs", str(job.job_id), "--follow", env=cli_env)
            )
            await asyncio.sleep(1)  # the follower waits on an attempt whose file does not exist yet
            write_attempt(job.job_id, 0, 1, "first attempt\n")
            preempted = job_state(
                job.job_id, [[attempt(1, outcome="preempted"), attempt(2, location="sim/r3/r3a")]]
            )
            await handle.signal(SET_STATE, preempted)
            write_attempt(job.job_id, 0, 2, "second attempt\n")
            assert not follow.done()
            finished = job_state(
                job.job_id,
                [[attempt(1, outcome="preempted"), attempt(2, location="sim/r3/r3a", outcome="succeeded")]],
                ManagedJobStatus.SUCCEEDED,
            )
            await handle.signal(SET_STATE, finished)
            followed = await asyncio.wait_for(follow, 120)
        assert followed.returncode == 0, followed.stderr
        assert followed.stdout.splitlines() == [
            "first attempt",
            "--- recovery 1: attempt 2 on sim/r3/r3a (previous attempt: preempted) ---",
            "second attempt",
        ]

    run(scenario())
