"""The job index on the real dev server and worker: what jobs report, what shards keep, what
``jobs queue`` lists from them, and ``submit_jobs``' one block of ids."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from skyhop.activities.job_index import report_row
from skyhop.cli.failures import asked_again
from skyhop.cli.job_ids import allocate_job_id
from skyhop.cli.jobs_submit import submit_jobs
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.job_index import (
    JobIndexInput,
    JobIndexQuery,
    JobIndexRow,
    JobIndexSignal,
    JobRowsFilter,
    ManagedJobStatus,
    job_index_shard,
    job_index_workflow_id,
    managed_job_workflow_id,
)
from skyhop.contract.managed_jobs import ManagedJobRequest, ManagedJobState
from skyhop.spec import Resources, Task
from tests.conftest import run, skyhop
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for
from tests.managed_jobs.fakes import allocated_ids, fake_job_id, start_listed, user_env
from tests.managed_jobs.support import attempt, gate, index_row, job_state, open_gate, start_job, until_state

pytestmark = pytest.mark.integration


async def _rows(client: Client, shard: int, wanted: JobRowsFilter | None = None) -> list[JobIndexRow]:
    handle = client.get_workflow_handle(job_index_workflow_id(shard))
    rows: list[JobIndexRow] = await asked_again(
        lambda: handle.query(JobIndexQuery.ROWS, wanted or JobRowsFilter(), result_type=list[JobIndexRow])
    )
    return rows


async def _row_of(client: Client, job_id: int) -> JobIndexRow | None:
    with contextlib.suppress(RPCError):  # the shard not started yet
        for row in await _rows(client, job_index_shard(job_id)):
            if row.summary.job_id == job_id:
                return row
    return None


async def _until_row(client: Client, job_id: int, status: ManagedJobStatus) -> JobIndexRow:
    deadline = time.monotonic() + 60
    while (row := await _row_of(client, job_id)) is None or row.summary.status != status:
        assert time.monotonic() < deadline, f"job {job_id}'s row never read {status}; it reads {row}"
        await asyncio.sleep(0.1)
    return row


def test_a_jobs_row_goes_from_pending_to_succeeded_in_its_shard_and_is_final_when_the_job_ends(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        handle = await start_job(client, [Task(run=gate(tmp_path), resources=Resources(infra="sim"))])
        await until_state(handle, lambda s: s.status == ManagedJobStatus.RUNNING, "the job RUNNING")
        running = await _until_row(client, _job_id(handle), ManagedJobStatus.RUNNING)
        assert running.user == "tester" and running.summary.running_since is not None
        open_gate(tmp_path)
        final = await handle.result()
        assert final.status == ManagedJobStatus.SUCCEEDED
        row = await _row_of(client, final.job_id)  # no waiting: the job ended after its last report
        assert row is not None and row.summary.status == ManagedJobStatus.SUCCEEDED
        assert row.seq == final.published > running.seq
        assert row.summary.ended_at == final.ended_at

    run(scenario())


def _job_id(handle: WorkflowHandle[object, ManagedJobState]) -> int:
    return int(handle.id.rsplit(":", 1)[1])


_LATE_PENDING = [(ManagedJobStatus.RUNNING, 2), (ManagedJobStatus.PENDING, 1)]
"""A job's reports in the order they arrive: its PENDING (seq 1) after its RUNNING (seq 2)."""


@pytest.mark.parametrize("round_", range(5))
def test_a_shard_continues_as_new_keeping_its_rows(
    temporal_server: DevServer, live_worker: WorkerProcess, round_: int
) -> None:
    """Looped, the reports sent a few at a time (each few one or two signals): one lost across a
    continue-as-new would show as a row missing or stale."""

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        shard = fake_job_id()  # a shard no other test's jobs fall in
        first = await client.start_workflow(
            WorkflowType.JOB_INDEX,
            JobIndexInput(shard=shard, history_limit=20),
            id=job_index_workflow_id(shard),
            task_queue=WORKFLOW_QUEUE,
        )
        ids = [shard * 1000 + n for n in range(30)]
        await first.signal(JobIndexSignal.CANCELLING, [ids[0], ids[1]])  # before any report of theirs
        reports = [index_row(job_id, status, seq) for job_id in ids for status, seq in _LATE_PENDING]
        reports.append(index_row(ids[0], ManagedJobStatus.SUCCEEDED, 3))
        for start in range(0, len(reports), 3):
            await asyncio.gather(*(report_row(client, row) for row in reports[start : start + 3]))
        deadline = time.monotonic() + 60
        while (await client.get_workflow_handle(first.id).describe()).run_id == first.result_run_id:
            assert time.monotonic() < deadline, "the shard never continued as new"
            await asyncio.sleep(0.1)
        rows = {row.summary.job_id: row.summary.status for row in await _rows(client, shard)}
        assert rows == {job_id: ManagedJobStatus.RUNNING for job_id in ids[2:]} | {
            ids[0]: ManagedJobStatus.SUCCEEDED,  # its end cleared its mark
            ids[1]: ManagedJobStatus.CANCELLING,
        }
        active = await _rows(client, shard, JobRowsFilter(active_only=True))
        assert len(active) == 29
        await client.get_workflow_handle(first.id).terminate("test over")

    run(scenario())


def test_reports_sent_at_once_reach_their_shard_in_a_few_signals(
    temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    """A burst of one shard's reports (a thousand jobs cancelled at once) is batched: the server
    takes one workflow's signals one at a time."""

    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        shard = fake_job_id()
        ids = [shard * 1000 + n for n in range(200)]
        await asyncio.gather(
            *(report_row(client, index_row(job_id, ManagedJobStatus.RUNNING, 1)) for job_id in ids)
        )
        rows = await _rows(client, shard)
        assert sorted(row.summary.job_id for row in rows) == ids
        handle = client.get_workflow_handle(job_index_workflow_id(shard))
        signals = [
            e
            async for e in handle.fetch_history_events()
            if e.HasField("workflow_execution_signaled_event_attributes")
        ]
        assert 1 <= len(signals) <= 10, f"{len(signals)} signals for 200 reports"
        await handle.terminate("test over")

    run(scenario())


async def _ids_across_a_shard_boundary(client: Client) -> tuple[int, int]:
    """Two allocated ids either side of a shard boundary (999 and 1000 in a fresh session)."""
    probe = await allocate_job_id(client, f"probe-{uuid.uuid4().hex}")
    boundary = (job_index_shard(probe) + 1) * 1000
    taken = await allocated_ids(client, boundary - probe)  # probe + 1 .. boundary
    return boundary - 1, taken[-1]


def test_jobs_queue_lists_rows_from_two_shards(
    temporal_server: DevServer, live_worker: WorkerProcess, cli_env: dict[str, str]
) -> None:
    env, user = user_env(cli_env)

    async def start() -> list[WorkflowHandle[object, object]]:
        client = await client_for(temporal_server.address)
        below, above = await _ids_across_a_shard_boundary(client)
        assert job_index_shard(below) + 1 == job_index_shard(above)
        states = [
            job_state(below, [[attempt(1)]], ManagedJobStatus.RUNNING),
            job_state(above, [[attempt(1)]], ManagedJobStatus.SUCCEEDED),
        ]
        return [
            await start_listed(client, s.model_copy(update={"user": user, "name": f"j{s.job_id}"}))
            for s in states
        ]

    handles = run(start())
    try:
        queue = skyhop("jobs", "queue", env=env)
        assert queue.returncode == 0, queue.stderr
        rows = [line.split() for line in queue.stdout.splitlines()[1:]]
        below, above = map(_job_id, handles)
        assert [(row[0], row[-1]) for row in rows] == [(str(above), "SUCCEEDED"), (str(below), "RUNNING")]
        active = json.loads(skyhop("jobs", "queue", "--skip-finished", "--json", env=env).stdout)["items"]
        assert [item["job_id"] for item in active] == [below]
    finally:
        for handle in handles:
            with contextlib.suppress(RPCError):
                run(handle.terminate("test over"))


def test_submit_jobs_of_fifty_gets_fifty_consecutive_ids(
    temporal_server: DevServer, live_worker: WorkerProcess, sim_catalog: Path
) -> None:
    async def scenario() -> list[int]:
        client = await client_for(temporal_server.address)
        # No offering fits: each job ends FAILED_PRECHECKS at once, holding nothing.
        task = Task(run="true", resources=Resources(infra="sim", accelerators="H100:64"))
        request = ManagedJobRequest(
            job_id=1, name=f"many-{uuid.uuid4().hex[:6]}", tasks=[task], user="tester"
        )
        ids = await submit_jobs(client, [request] * 50)
        ends = await asyncio.gather(
            *(
                client.get_workflow_handle(managed_job_workflow_id(i), result_type=ManagedJobState).result()
                for i in ids
            )
        )
        assert [end.job_id for end in ends] == ids
        assert {end.status for end in ends} == {ManagedJobStatus.FAILED_PRECHECKS}
        return ids

    ids = run(scenario())
    assert ids == list(range(ids[0], ids[0] + 50))
