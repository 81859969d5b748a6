"""``skyhop jobs queue`` and ``skyhop jobs cancel``: managed jobs found through the job index.

A listing asks every ``JobIndexWorkflow`` shard at once (shards 0..``last // 1000`` of the id
allocator's ``last``) for its rows, filtered by user and done-ness in the shard, so 10,000 jobs
are ten queries; visibility answers about half a millisecond per row, which at 10,000 jobs takes
seconds. Beside it one visibility query finds the few jobs whose workflow ended without saying
how (terminated by an operator), whose row still reads as if the job ran. Cancel is Temporal's
own workflow cancel, sent to many jobs at once (bounded), then one ``cancelling`` signal to each
shard marks the cancelled jobs there; each job then removes its clusters and ends CANCELLED.
"""

from __future__ import annotations

import asyncio
import gc
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from skyhop.cli.failures import Patience
from skyhop.cli.output import age, duration, fail, info, print_json, table
from skyhop.contract import SearchAttribute, WorkflowKind
from skyhop.contract.job_index import JobRowsFilter, ManagedJobStatus, ManagedJobSummary

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = [
    "QUEUE_HEADERS",
    "id_ranges",
    "indexed_jobs",
    "listing_query",
    "queue_row",
    "run_jobs_cancel",
    "run_jobs_queue",
    "shown_status",
    "visible_jobs",
]

Listed = tuple[ManagedJobSummary, ManagedJobStatus, str]
"""A job as a listing shows it: its summary, its shown status, its user."""

QUEUE_HEADERS = [
    "ID",
    "NAME",
    "RESOURCES",
    "SUBMITTED",
    "TOTAL DURATION",
    "JOB DURATION",
    "#RECOVERIES",
    "STATUS",
]
_PAGE_SIZE = 1_000
_CANCELS_IN_FLIGHT = 64
"""Cancels sent at once: enough that 2,000 take a few seconds, few enough not to flood the server."""


def _quoted(value: str) -> str:
    """A string literal of Temporal's visibility query language."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def listing_query(
    user: str | None, *, active_only: bool = False, name: str | None = None, ended_only: bool = False
) -> str:
    """The visibility query for managed jobs: of ``user`` (None: everyone's), optionally only those
    not done, or named ``name``, or whose workflow has ended. A run that continued as new is left
    out: its successor (same id) is the job."""
    clauses = [f"{SearchAttribute.KIND} = {_quoted(WorkflowKind.MANAGED_JOB)}"]
    if user is not None:
        clauses.append(f"{SearchAttribute.USER} = {_quoted(user)}")
    if name is not None:
        clauses.append(f"{SearchAttribute.NAME} = {_quoted(name)}")
    if active_only:
        active = ", ".join(_quoted(s) for s in ManagedJobStatus if not s.done)
        clauses.append(f"{SearchAttribute.STATUS} IN ({active})")
    if ended_only:
        clauses.append("ExecutionStatus != 'Running'")
    clauses.append("ExecutionStatus != 'ContinuedAsNew'")
    return " AND ".join(clauses)


def shown_status(
    summary: ManagedJobSummary, workflow_running: bool, workflow_cancelled: bool
) -> ManagedJobStatus:
    """The status to show: the memo's, unless the workflow ended without saying how (terminated by
    an operator, say), when its memo still reads as if the job ran."""
    if workflow_running or summary.status.done:
        return summary.status
    return ManagedJobStatus.CANCELLED if workflow_cancelled else ManagedJobStatus.FAILED


def queue_row(summary: ManagedJobSummary, status: ManagedJobStatus, now: float) -> list[str]:
    """One line of ``jobs queue``."""
    total = (summary.ended_at or now) - summary.submitted_at
    ran = summary.job_seconds
    if summary.running_since is not None and summary.ended_at is None:
        ran += max(now - summary.running_since, 0)
    return [
        str(summary.job_id),
        summary.name,
        summary.resources,
        age(summary.submitted_at),
        duration(total),
        duration(ran) if ran or summary.running_since is not None else "-",
        str(summary.recoveries),
        status.value,
    ]


async def visible_jobs(client: Client, query: str) -> list[Listed]:
    """Each job ``query`` finds in visibility, newest first, one visibility page per thousand.

    The pages are read raw and only what is shown is decoded: the memo (one batch per page, through
    the data converter, so each summary's signature is checked) and the user. The SDK's listing
    would decode every search attribute of every row, which at 10,000 jobs costs more than the rest.
    """
    import json

    from temporalio.api.enums.v1 import WorkflowExecutionStatus
    from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest

    from skyhop.contract.job_index import MEMO_KEY

    found: dict[str, Listed] = {}
    token = b""
    while True:
        page = await client.workflow_service.list_workflow_executions(
            ListWorkflowExecutionsRequest(
                namespace=client.namespace, query=query, page_size=_PAGE_SIZE, next_page_token=token
            )
        )
        rows = [row for row in page.executions if MEMO_KEY in row.memo.fields]
        summaries = await client.data_converter.decode(
            [row.memo.fields[MEMO_KEY] for row in rows], [ManagedJobSummary] * len(rows)
        )
        for row, summary in zip(rows, summaries, strict=True):
            running = row.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
            cancelled = row.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED
            user = row.search_attributes.indexed_fields.get(SearchAttribute.USER)
            if row.execution.workflow_id not in found or running:
                found[row.execution.workflow_id] = (
                    summary,
                    shown_status(summary, running, cancelled),
                    json.loads(user.data) if user is not None else "-",
                )
        token = page.next_page_token
        if not token:
            break
    return sorted(found.values(), key=lambda item: item[0].job_id, reverse=True)


def _patience() -> Patience:
    """One command's patience with answers that come late (said once however many do)."""
    return Patience("Temporal answers late (its worker is busy with many jobs, or none runs); waiting ...")


async def _query(
    client: Client, workflow_id: str, query: str, arg: Any, result_type: Any, missing: Any, patience: Patience
) -> Any:
    """A query's answer, or ``missing`` when the workflow was never started (a shard no job of
    its range reported to yet; the allocator before the first submit)."""
    from temporalio.service import RPCError

    from skyhop.cli.failures import asked_again, is_not_found

    handle = client.get_workflow_handle(workflow_id)
    args = [] if arg is None else [arg]
    try:
        return await patience.send(
            lambda: asked_again(lambda: handle.query(query, args=args, result_type=result_type))
        )
    except RPCError as exc:
        if not is_not_found(exc):
            raise
        return missing


async def _shard_rows(client: Client, shard: int, wanted: JobRowsFilter, patience: Patience) -> list[Listed]:
    from skyhop.contract.job_index import JobIndexQuery, JobIndexRow, job_index_workflow_id

    rows: list[JobIndexRow] = await _query(
        client, job_index_workflow_id(shard), JobIndexQuery.ROWS, wanted, list[JobIndexRow], [], patience
    )
    return [(row.summary, row.summary.status, row.user) for row in rows]


async def _last_job_id(client: Client, patience: Patience) -> int:
    from skyhop.contract.job_index import MANAGED_JOB_IDS_ID, ManagedJobIdsQuery

    last: int = await _query(client, MANAGED_JOB_IDS_ID, ManagedJobIdsQuery.LAST, None, int, 0, patience)
    return last


async def indexed_jobs(
    client: Client, wanted: JobRowsFilter, patience: Patience | None = None, *, of: list[int] | None = None
) -> list[Listed]:
    """The jobs ``wanted`` selects, newest first: every shard's rows (only those of the shards that
    hold job ids ``of``, if given), corrected by visibility for the jobs whose workflow ended
    without saying how (``shown_status``); a shard that answers late is asked again (``patience``)."""
    from skyhop.contract.job_index import job_index_shard

    patience = patience or _patience()
    if of is None:
        shards = list(range(job_index_shard(await _last_job_id(client, patience)) + 1))
    else:
        shards = sorted({job_index_shard(job_id) for job_id in of})
    ended = listing_query(wanted.user, active_only=True, name=wanted.name, ended_only=True)
    unsaid, *parts = await asyncio.gather(
        visible_jobs(client, ended), *(_shard_rows(client, shard, wanted, patience) for shard in shards)
    )
    corrected = {summary.job_id: (summary, status, user) for summary, status, user in unsaid}
    jobs = [corrected.get(job[0].job_id, job) for part in parts for job in part]
    if wanted.active_only:
        jobs = [job for job in jobs if not job[1].done]
    return sorted(jobs, key=lambda job: job[0].job_id, reverse=True)


async def run_jobs_queue(*, all_users: bool, skip_finished: bool, as_json: bool) -> int:
    from skyhop.cli.session import current_user, open_client

    # The listing makes tens of thousands of objects (each row's summary and cells), none in a
    # cycle, and the process ends once they are printed: the cyclic collector's passes over them
    # freed nothing and took about 50 ms of the command at 10,000 jobs.
    gc.disable()
    client = await open_client()
    user = current_user()
    jobs = await indexed_jobs(
        client, JobRowsFilter(user=None if all_users else user, active_only=skip_finished)
    )
    if as_json:
        items: list[dict[str, Any]] = [
            {**summary.model_dump(mode="json"), "status": status.value, "user": owner}
            for summary, status, owner in jobs
        ]
        print_json("managed_jobs", items)
        return 0
    if not jobs:
        info("No managed jobs." if all_users else f"No managed jobs of user {user} (-a: every user's).")
        return 0
    now = time.time()
    table(QUEUE_HEADERS, [queue_row(summary, status, now) for summary, status, _ in jobs])
    return 0


def id_ranges(ids: list[int]) -> str:
    """``1-3, 7, 9-10``: a long list of ids, short."""
    parts: list[str] = []
    ordered = sorted(set(ids))
    start = previous = ordered[0] if ordered else 0
    for number in [*ordered[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return ", ".join(parts) if ordered else ""


async def run_jobs_cancel(job_ids: list[int], *, name: str | None, all_jobs: bool) -> int:
    """Cancel each job's workflow; say which were cancelled, which had ended, which do not exist."""
    from skyhop.cli.session import current_user, open_client

    client = await open_client()
    patience = _patience()
    if name is not None or all_jobs:
        wanted = JobRowsFilter(user=current_user(), name=name, active_only=True)
        job_ids = [summary.job_id for summary, _, _ in await indexed_jobs(client, wanted, patience)]
        if not job_ids:
            what = f"named {name!r}" if name is not None else f"of user {current_user()}"
            info(f"No running managed jobs {what}.")
            return 0
        listed_running = set(job_ids)
    else:
        listed = await indexed_jobs(client, JobRowsFilter(user=None, active_only=True), patience, of=job_ids)
        listed_running = {summary.job_id for summary, _, _ in listed} & set(job_ids)
    gate = asyncio.Semaphore(_CANCELS_IN_FLIGHT)

    async def one(job_id: int) -> _Cancelled:
        async with gate:
            return await _cancel(client, job_id, patience, listed_running=job_id in listed_running)

    outcomes = await asyncio.gather(*(one(job_id) for job_id in job_ids))
    by_outcome: dict[_Cancelled, list[int]] = {}
    for job_id, outcome in zip(job_ids, outcomes, strict=True):
        by_outcome.setdefault(outcome, []).append(job_id)
    await _mark_cancelling(client, by_outcome.get(_Cancelled.YES, []), patience)
    if by_outcome.get(_Cancelled.YES):
        info(
            f"Cancelling managed job(s) {id_ranges(by_outcome[_Cancelled.YES])}: "
            "each ends CANCELLED once its clusters are gone."
        )
    if by_outcome.get(_Cancelled.ENDED):
        info(f"Managed job(s) {id_ranges(by_outcome[_Cancelled.ENDED])} had already ended.")
    if by_outcome.get(_Cancelled.UNKNOWN):
        fail(f"no managed job(s) {id_ranges(by_outcome[_Cancelled.UNKNOWN])}; see: skyhop jobs queue")
    return 0


async def _mark_cancelling(client: Client, job_ids: list[int], patience: Patience) -> None:
    """Tell each shard which of its jobs were cancelled, so listings show them CANCELLING now, not
    once each job's workflow got to its cancel. A shard not started yet holds no row to mark: its
    jobs report CANCELLING themselves."""
    from temporalio.service import RPCError

    from skyhop.cli.failures import is_not_found, while_busy
    from skyhop.contract.job_index import JobIndexSignal, job_index_shard, job_index_workflow_id

    by_shard: dict[int, list[int]] = {}
    for job_id in job_ids:
        by_shard.setdefault(job_index_shard(job_id), []).append(job_id)

    async def mark(shard: int, ids: list[int]) -> None:
        handle = client.get_workflow_handle(job_index_workflow_id(shard))
        try:
            await patience.send(lambda: while_busy(lambda: handle.signal(JobIndexSignal.CANCELLING, ids)))
        except RPCError as exc:
            if not is_not_found(exc):
                raise

    await asyncio.gather(*(mark(shard, ids) for shard, ids in by_shard.items()))


class _Cancelled(StrEnum):
    """How one job's cancel went."""

    YES = "cancelled"
    ENDED = "ended"
    """Its workflow had completed already."""
    UNKNOWN = "unknown"


async def _cancel(client: Client, job_id: int, patience: Patience, *, listed_running: bool) -> _Cancelled:
    """Cancel one job's workflow, if it still runs: Temporal takes a cancel of an ended workflow
    without a word, so whether it had ended is asked first, unless the job index just listed it
    running (one call per job instead of two: 2,000 ids of 10,000 jobs are a query to each shard
    that holds them, where they were 2,000 more calls, on the server that handles the cancels)."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from skyhop.cli.failures import is_not_found, while_busy
    from skyhop.contract.job_index import managed_job_workflow_id

    handle = client.get_workflow_handle(managed_job_workflow_id(job_id))
    try:
        if not listed_running:
            description = await patience.send(lambda: while_busy(handle.describe))
            if description.status != WorkflowExecutionStatus.RUNNING:
                return _Cancelled.ENDED
        await patience.send(lambda: while_busy(handle.cancel))
    except RPCError as exc:
        if not is_not_found(exc):
            raise
        return _Cancelled.UNKNOWN
    return _Cancelled.YES
