"""What finds and lists managed jobs: their ids, statuses and summaries, and the job index.

Job ids are short and sequential: ``ManagedJobIdsWorkflow`` (id ``managed-job-ids``) hands them
out through its ``allocate`` update, once per ``request_id``; a job's workflow id is
``managed-job:<id>``, and its ``state`` query (``ManagedJobQuery``) answers a
``contract.managed_jobs.ManagedJobState``. The summary a listing needs is in the job's memo
(``MEMO_KEY``, a ``ManagedJobSummary``) and its status in the ``SkyhopStatus`` search attribute.

``jobs queue`` reads the job index: ``JobIndexWorkflow`` shards (id ``job-index:<job id // 1000>``),
each holding a ``JobIndexRow`` per job of its id range, which every job reports (signal ``row``) on
each status change, and ``jobs cancel`` marks the jobs it cancelled (signal ``cancelling``); the
``rows`` query takes a ``JobRowsFilter``. The shards to ask are 0..``last // 1000`` of the
allocator's ``last`` query.

A module of its own, which imports nothing of skyhop's but the contract's names, so that a listing
does not load the task model that ``contract.managed_jobs`` (a job's request and state) needs.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

__all__ = [
    "MANAGED_JOB_IDS_ID",
    "MAX_IDS_PER_ALLOCATION",
    "MEMO_KEY",
    "AllocateIds",
    "AllocatedIds",
    "JOB_INDEX_SHARD_SIZE",
    "JobIndexInput",
    "JobIndexQuery",
    "JobIndexRow",
    "JobIndexSignal",
    "JobRowsFilter",
    "ManagedJobIdsInput",
    "ManagedJobIdsQuery",
    "ManagedJobIdsUpdate",
    "ManagedJobQuery",
    "ManagedJobStatus",
    "ManagedJobSummary",
    "job_index_shard",
    "job_index_workflow_id",
    "managed_job_workflow_id",
]

MANAGED_JOB_IDS_ID = "managed-job-ids"
"""The id of the workflow that hands out job ids."""
MEMO_KEY = "skyhop-managed-job"
"""The memo field holding the job's ``ManagedJobSummary``."""


class ManagedJobStatus(StrEnum):
    """SkyPilot's managed-job statuses, without FAILED_CONTROLLER: a dead worker only delays a job."""

    PENDING = "PENDING"
    """Submitted, or waiting (durably) for capacity before its first start."""
    STARTING = "STARTING"
    """Provisioning its cluster, syncing, running setup."""
    RUNNING = "RUNNING"
    RECOVERING = "RECOVERING"
    """Preempted (or restarting after a failure): bringing a cluster up again."""
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    """The run exited non-zero and no restart was left."""
    FAILED_SETUP = "FAILED_SETUP"
    FAILED_PRECHECKS = "FAILED_PRECHECKS"
    """No offering can ever fit the task (wrong infra, resources no catalog has)."""
    FAILED_NO_RESOURCE = "FAILED_NO_RESOURCE"
    """Every candidate failed for the number of searches the job was allowed."""
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"

    @property
    def done(self) -> bool:
        return self in _DONE


_DONE = frozenset(
    {
        ManagedJobStatus.SUCCEEDED,
        ManagedJobStatus.FAILED,
        ManagedJobStatus.FAILED_SETUP,
        ManagedJobStatus.FAILED_PRECHECKS,
        ManagedJobStatus.FAILED_NO_RESOURCE,
        ManagedJobStatus.CANCELLED,
    }
)


class ManagedJobSummary(BaseModel):
    """What ``jobs queue`` lists, from the memo (kept current as the job changes status)."""

    job_id: int
    name: str
    resources: str
    status: ManagedJobStatus
    submitted_at: float
    ended_at: float | None = None
    recoveries: int = 0
    job_seconds: float = 0.0
    running_since: float | None = None
    message: str | None = None
    primary_tasks: list[str] = []
    """A job group's primary tasks, whose end is the job's; empty: every task's end counts."""


JOB_INDEX_SHARD_SIZE = 1_000
"""Job ids per ``JobIndexWorkflow`` shard: a shard's rows stay a few hundred KB."""


class JobIndexRow(BaseModel):
    """A job as the job index holds it: its summary, its user, and how recent the report is."""

    summary: ManagedJobSummary
    user: str
    seq: int
    """``ManagedJobState.published`` when the job reported it: a shard keeps the highest."""


class JobRowsFilter(BaseModel):
    """The ``rows`` query's argument: which rows to answer, so the answer stays small."""

    user: str | None = None
    """None: every user's."""
    active_only: bool = False
    """Only jobs whose status is not done."""
    name: str | None = None


class JobIndexInput(BaseModel):
    """``JobIndexWorkflow``'s input: its shard, and the rows a continue-as-new carries."""

    shard: int = Field(ge=0)
    rows: list[JobIndexRow] = []
    cancelling: list[int] = []
    """The jobs marked CANCELLING (``JobIndexSignal.CANCELLING``) that had not reported their end."""
    history_limit: int | None = None
    """Continue as new once the history has this many events (None: the shard's default)."""


class JobIndexSignal(StrEnum):
    ROW = "row"
    """A ``JobIndexRow``: kept unless the shard has a row of that job with a higher ``seq``."""
    ROWS = "rows"
    """A ``list[JobIndexRow]``, each taken as ``row`` takes it (a worker's reports, batched)."""
    CANCELLING = "cancelling"
    """A ``list[int]``: jobs whose cancel Temporal took. Each reads CANCELLING until it reports its
    end, whichever of its reports land after: ``jobs cancel`` sends it once its cancels went, so a
    listing shows them at once, not as each job gets to its cancel (of 1,000 jobs cancelled at
    once, 906 still read RUNNING when the command returned). A job ended already is not marked."""


class JobIndexQuery(StrEnum):
    ROWS = "rows"
    """``JobRowsFilter`` -> ``list[JobIndexRow]``, in no particular order."""


def job_index_shard(job_id: int) -> int:
    return job_id // JOB_INDEX_SHARD_SIZE


def job_index_workflow_id(shard: int) -> str:
    return f"job-index:{shard}"


class ManagedJobQuery(StrEnum):
    STATE = "state"
    """The ``ManagedJobState``."""


class ManagedJobIdsUpdate(StrEnum):
    ALLOCATE = "allocate"
    """``AllocateIds`` -> ``AllocatedIds``."""


class ManagedJobIdsQuery(StrEnum):
    LAST = "last"
    """The last id handed out (an int)."""


MAX_IDS_PER_ALLOCATION = 10_000
"""The most ids one ``allocate`` update hands out."""


class AllocateIds(BaseModel):
    request_id: str
    """The same request id gets the same ids again (a retried submit)."""
    count: int = Field(default=1, ge=1, le=MAX_IDS_PER_ALLOCATION)


class AllocatedIds(BaseModel):
    first: int
    count: int


class ManagedJobIdsInput(BaseModel):
    """``ManagedJobIdsWorkflow``'s input: empty to begin with, then what a continue-as-new carries."""

    last: int = Field(default=0, ge=0)
    """The last id handed out."""
    recent: dict[str, AllocatedIds] = {}
    """The latest requests' ids by ``request_id``, oldest first (bounded), so a retried submit gets
    the same ids back."""
    history_limit: int | None = None
    """Continue as new once the history has this many events (tests force a small one)."""


def managed_job_workflow_id(job_id: int) -> str:
    return f"managed-job:{job_id}"
