"""``ManagedJobIdsWorkflow`` on the real dev server and worker: ids unique and sequential.

Each test has an allocator of its own (``workflow_id``), reached exactly as ``jobs launch`` does
(``cli.job_ids.allocate_job_id``: update-with-start).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from skyhop.cli.failures import asked_again
from skyhop.cli.job_ids import allocate_job_id
from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
from skyhop.contract.job_index import ManagedJobIdsInput, ManagedJobIdsQuery
from tests.conftest import run
from tests.helpers import DevServer, WorkerProcess
from tests.integration.support import client_for

pytestmark = pytest.mark.integration


def _allocator_id() -> str:
    return f"managed-job-ids-test-{uuid.uuid4().hex[:8]}"


def test_the_first_submit_creates_the_allocator_and_ids_count_from_one(
    temporal_server: DevServer, live_worker: WorkerProcess
) -> None:
    async def scenario() -> list[int]:
        client = await client_for(temporal_server.address)
        allocator = _allocator_id()
        return [await allocate_job_id(client, f"r{n}", workflow_id=allocator) for n in range(3)]

    assert run(scenario()) == [1, 2, 3]


@pytest.mark.parametrize("round_", range(5))
def test_twenty_concurrent_submits_get_ids_one_to_twenty_across_continues_as_new(
    temporal_server: DevServer, live_worker: WorkerProcess, round_: int
) -> None:
    """Looped: an update lost (or answered twice) across a continue-as-new would show as a gap."""

    async def scenario() -> tuple[list[int], int, int, int]:
        client = await client_for(temporal_server.address)
        allocator = _allocator_id()
        first = await client.start_workflow(
            WorkflowType.MANAGED_JOB_IDS,
            ManagedJobIdsInput(history_limit=20),
            id=allocator,
            task_queue=WORKFLOW_QUEUE,
        )
        requests = [f"submit-{n}" for n in range(20)]
        ids = await asyncio.gather(*(allocate_job_id(client, r, workflow_id=allocator) for r in requests))
        again = await allocate_job_id(client, requests[7], workflow_id=allocator)  # a retried submit
        assert again == ids[7]
        latest = client.get_workflow_handle(allocator)
        last: int = await asked_again(lambda: latest.query(ManagedJobIdsQuery.LAST, result_type=int))
        runs = [w async for w in client.list_workflows(f"WorkflowId = '{allocator}'")]
        assert (await latest.describe()).run_id != first.result_run_id
        return sorted(ids), again, last, len(runs)

    ids, again, last, runs = run(scenario())
    assert ids == list(range(1, 21))
    assert last == 20
    assert runs >= 2, "the allocator never continued as new"
