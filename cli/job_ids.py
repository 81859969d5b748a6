"""Asking ``ManagedJobIdsWorkflow`` for a managed-job id, creating it on the first submit ever."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyhop.cli.failures import while_busy
from skyhop.contract.job_index import MANAGED_JOB_IDS_ID

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyhop.contract.job_index import AllocatedIds

__all__ = ["allocate_job_id", "allocate_job_ids"]


async def allocate_job_id(client: Client, request_id: str, *, workflow_id: str = MANAGED_JOB_IDS_ID) -> int:
    """The next job id (see ``allocate_job_ids``)."""
    return (await allocate_job_ids(client, request_id, 1, workflow_id=workflow_id)).first


async def allocate_job_ids(
    client: Client, request_id: str, count: int, *, workflow_id: str = MANAGED_JOB_IDS_ID
) -> AllocatedIds:
    """The next ``count`` consecutive job ids, by update-with-start: whoever submits first starts
    the allocator. One update for the block, however large: the allocator takes at most 10
    updates in flight, so a program submitting many jobs asks once instead of once per job.

    The update's id is ``request_id``, and the allocator remembers its answer for it, so sending
    it again (the server was busy, or the allocator was continuing as new) gets the same ids.
    ``workflow_id`` is the allocator's: tests give each its own.
    """
    from temporalio.client import WithStartWorkflowOperation
    from temporalio.common import WorkflowIDConflictPolicy

    from skyhop.contract import WORKFLOW_QUEUE, WorkflowType
    from skyhop.contract.job_index import AllocatedIds, AllocateIds, ManagedJobIdsInput, ManagedJobIdsUpdate

    async def send() -> AllocatedIds:
        start: WithStartWorkflowOperation[Any, None] = WithStartWorkflowOperation(
            WorkflowType.MANAGED_JOB_IDS,
            ManagedJobIdsInput(),
            id=workflow_id,
            task_queue=WORKFLOW_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        allocated: AllocatedIds = await client.execute_update_with_start_workflow(
            ManagedJobIdsUpdate.ALLOCATE,
            AllocateIds(request_id=request_id, count=count),
            start_workflow_operation=start,
            id=request_id,
            result_type=AllocatedIds,
        )
        return allocated

    return await while_busy(send)
