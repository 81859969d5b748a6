"""``ManagedJobIdsWorkflow`` (id ``managed-job-ids``): hands out managed-job ids, 1, 2, 3, ...

An entity workflow, so ids are sequential and unique without a database: its ``allocate``
update runs one at a time in workflow order. The CLI reaches it with update-with-start, so the
first submit ever creates it. It never ends; it continues as new once its history is long,
carrying the counter and the recent answers (``workflows.id_ledger``), after every handler has
finished so no update is lost across the runs.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from skyhop.contract import WorkflowType
    from skyhop.contract.job_index import (
        AllocatedIds,
        AllocateIds,
        ManagedJobIdsInput,
        ManagedJobIdsQuery,
        ManagedJobIdsUpdate,
    )
    from skyhop.workflows.id_ledger import IdLedger
    from skyhop.workflows.stages import history_is_long

__all__ = ["ManagedJobIdsWorkflow"]


@workflow.defn(name=WorkflowType.MANAGED_JOB_IDS)
class ManagedJobIdsWorkflow:
    @workflow.init
    def __init__(self, input: ManagedJobIdsInput) -> None:
        self.ledger = IdLedger(input)
        self.history_limit = input.history_limit

    @workflow.run
    async def run(self, input: ManagedJobIdsInput) -> None:
        await workflow.wait_condition(lambda: history_is_long(self.history_limit))
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(self.ledger.carried(self.history_limit))

    @workflow.update(name=ManagedJobIdsUpdate.ALLOCATE.value)
    def allocate(self, request: AllocateIds) -> AllocatedIds:
        """The next ids; a repeated ``request_id`` gets the ids it got the first time."""
        return self.ledger.allocate(request)

    @workflow.query(name=ManagedJobIdsQuery.LAST.value)
    def last(self) -> int:
        return self.ledger.last
