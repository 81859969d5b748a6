"""``JobIndexWorkflow`` (id ``job-index:<shard>``): the rows of a thousand managed jobs, for listings.

Visibility answers about half a millisecond per row on the embedded server, so listing 10,000
jobs from it takes seconds; a shard answers its thousand rows in one query. Every job reports
each status change to its shard (``activities.job_index``: signal-with-start, so the first report
creates the shard; a worker's reports that wait together are one ``rows`` signal), nothing while
it runs idle; ``jobs cancel`` marks the jobs it cancelled (``cancelling``); the merging rules are
``workflows.job_rows``.
It never ends: once its history is long it continues as new carrying its rows, after every
handler has finished, so no report is lost across the runs.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from skyhop.contract import WorkflowType
    from skyhop.contract.job_index import (
        JobIndexInput,
        JobIndexQuery,
        JobIndexRow,
        JobIndexSignal,
        JobRowsFilter,
    )
    from skyhop.workflows.job_rows import JobRows
    from skyhop.workflows.stages import history_is_long

__all__ = ["SHARD_HISTORY_LIMIT", "JobIndexWorkflow"]

SHARD_HISTORY_LIMIT = 2_000
"""Events before a shard continues as new: a worker that lost it from its cache replays at most
this many to answer a query, which keeps ``jobs queue`` fast."""


@workflow.defn(name=WorkflowType.JOB_INDEX)
class JobIndexWorkflow:
    @workflow.init
    def __init__(self, input: JobIndexInput) -> None:
        self.index = JobRows(input.rows, input.cancelling)

    @workflow.run
    async def run(self, input: JobIndexInput) -> None:
        limit = input.history_limit or SHARD_HISTORY_LIMIT
        await workflow.wait_condition(lambda: history_is_long(limit))
        await workflow.wait_condition(workflow.all_handlers_finished)
        carried = {"rows": self.index.carried(), "cancelling": self.index.carried_cancelling()}
        workflow.continue_as_new(input.model_copy(update=carried))

    @workflow.signal(name=JobIndexSignal.ROW.value)
    def row(self, row: JobIndexRow) -> None:
        self.index.merge(row)

    @workflow.signal(name=JobIndexSignal.ROWS.value)
    def batch(self, rows: list[JobIndexRow]) -> None:
        for row in rows:
            self.index.merge(row)

    @workflow.signal(name=JobIndexSignal.CANCELLING.value)
    def cancelling(self, job_ids: list[int]) -> None:
        self.index.mark_cancelling(job_ids)

    @workflow.query(name=JobIndexQuery.ROWS.value)
    def rows(self, wanted: JobRowsFilter) -> list[JobIndexRow]:
        return self.index.select(wanted)
