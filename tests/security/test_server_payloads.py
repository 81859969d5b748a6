"""Payloads the Temporal server writes itself carry no skyhop MAC, and must not fail a workflow.

The server cancels an activity that no worker has started yet on its own, recording the details
``"ACTIVITY_ID_NOT_STARTED"`` as a plain JSON payload; an activity awaited with
WAIT_CANCELLATION_COMPLETED then resolves with those details. Before, reading them failed the
cancelled launch with "rejected an unauthenticated payload" (a cancel that landed while an
activity waited in its queue, e.g. `test_cancel_leaves_no_instance[STARTING]`).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ActivityError, CancelledError
from temporalio.worker import Worker
from temporalio.workflow import ActivityCancellationType

from skyhop.contract.converter import UNAUTHENTICATED_PAYLOAD
from tests.conftest import run
from tests.helpers import DevServer
from tests.integration.support import client_for

NOBODY_POLLS = "skyhop-test-nobody-polls"


@workflow.defn(name="WaitsForAnUnstartedActivity", sandboxed=False)
class WaitsForAnUnstartedActivity:
    """Schedules an activity on a queue no worker polls, so only the server can cancel it."""

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_activity(
                "never_started",
                task_queue=NOBODY_POLLS,
                start_to_close_timeout=timedelta(seconds=60),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
        except ActivityError as err:
            assert isinstance(err.cause, CancelledError), repr(err.cause)
            raise err.cause from None
        return "completed"


async def scheduled(client: Client, workflow_id: str) -> None:
    """Waits until the activity is in the workflow's history (scheduled, never started)."""
    handle = client.get_workflow_handle(workflow_id)
    while not (await handle.describe()).raw_description.pending_activities:
        await asyncio.sleep(0.05)


def test_a_cancelled_activity_that_never_started_ends_the_workflow_cancelled(
    temporal_server: DevServer,
) -> None:
    async def scenario() -> None:
        client = await client_for(temporal_server.address)
        queue = f"server-payloads-{uuid.uuid4().hex[:8]}"
        workflow_id = f"unstarted-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[WaitsForAnUnstartedActivity]):
            handle = await client.start_workflow(
                WaitsForAnUnstartedActivity.run,
                id=workflow_id,
                task_queue=queue,
                execution_timeout=timedelta(seconds=60),
            )
            await asyncio.wait_for(scheduled(client, workflow_id), 30)
            await handle.cancel()
            try:
                await asyncio.wait_for(handle.result(), 30)
            except WorkflowFailureError as exc:
                assert UNAUTHENTICATED_PAYLOAD not in str(exc.cause), exc.cause
                assert isinstance(exc.cause, CancelledError), repr(exc.cause)
            else:
                raise AssertionError("the workflow completed though its activity was cancelled")

    run(scenario())
