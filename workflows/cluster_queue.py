"""A cluster's job queue: the records, their indexes, submission, limits, status moves and trimming.

Plain state over ``ClusterRecord.jobs`` and the active jobs' submissions; ``ClusterWorkflow`` runs
the jobs. The indexes make handling one event cost the same with 10 jobs or 1,000 (a replay
handles every event again, so a scan of the jobs per event would be quadratic). Which queued jobs
start is ``workflows.scheduler.schedule``, the function its tests test.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime

from skyhop.contract import JobStatus
from skyhop.contract.clusters import ClusterRecord, JobRecord, JobSubmission
from skyhop.providers.base import ClusterHandle
from skyhop.workflows.scheduler import Demand, NodeAllocation, capacity_of, demand_of, schedule

__all__ = ["KEEP_FINISHED_JOBS", "MAX_ACTIVE_JOBS", "MAX_QUEUED_BYTES", "JobQueue"]

MAX_ACTIVE_JOBS = 1000
"""Queued plus running jobs a cluster accepts; more are refused (the state must fit one payload)."""
MAX_QUEUED_BYTES = 800_000
"""Total JSON size of the submissions of active jobs (they are carried over a continue-as-new)."""
KEEP_FINISHED_JOBS = 500
"""Ended jobs kept in the record (and in ``skyhop queue``); older ones are dropped, oldest first."""
_TRIM_SLACK = 100
"""Ended jobs beyond ``KEEP_FINISHED_JOBS`` tolerated before a trim, so trims (a scan) are rare."""


class JobQueue:
    def __init__(self, record: ClusterRecord, submissions: dict[int, JobSubmission]) -> None:
        self._record = record
        """Its ``jobs`` are the records, in submission order; ``next_job_id`` numbers new ones."""
        jobs = record.jobs
        self.submissions = dict(submissions)
        """Submissions of the jobs that have not ended, by job id: carried over a continue-as-new."""
        self._by_request = {job.request_id: job for job in jobs}
        self._pending = {job.job_id: job for job in jobs if job.status == JobStatus.PENDING}
        self._started = {j.job_id: j for j in jobs if not j.status.done and j.status != JobStatus.PENDING}
        self._finished = sum(1 for job in jobs if job.status.done)
        self._sizes = {i: _size(s) for i, s in self.submissions.items()}
        self._stopping: dict[int, JobRecord] = {}
        """Ended jobs whose processes are still being stopped: their resources are not free yet."""

    # --- reading -----------------------------------------------------------------------------------

    def by_request(self, request_id: str) -> JobRecord | None:
        """The job a submission with this ``request_id`` created, if it is still in the record."""
        return self._by_request.get(request_id)

    @property
    def active(self) -> bool:
        """Some job is queued or started."""
        return bool(self._pending or self._started)

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def started(self) -> list[JobRecord]:
        """Jobs that are SETTING_UP or RUNNING."""
        return list(self._started.values())

    def submission(self, job: JobRecord) -> JobSubmission:
        return self.submissions[job.job_id]

    def notify_of(self, job: JobRecord) -> str | None:
        """The workflow to tell when the job ends (``JobSubmission.notify``), while it is active."""
        submission = self.submissions.get(job.job_id)
        return submission.notify if submission is not None else None

    # --- submitting --------------------------------------------------------------------------------

    def too_much(self, submission: JobSubmission) -> str | None:
        """Why the queue cannot take ``submission`` now (its limits), or None."""
        cluster_name = self._record.name
        if len(self._pending) + len(self._started) >= MAX_ACTIVE_JOBS:
            return (
                f"cluster {cluster_name} already has {MAX_ACTIVE_JOBS} queued or running jobs, the most "
                "it takes; wait for some to end, or cancel some with: skyhop cancel"
            )
        if sum(self._sizes.values()) + _size(submission) > MAX_QUEUED_BYTES:
            return (
                f"the queued jobs of cluster {cluster_name} would exceed {MAX_QUEUED_BYTES // 1000} kB of "
                "task definitions; wait for some to end, or put long scripts in files in the workdir"
            )
        return None

    def submit(self, submission: JobSubmission, now: datetime) -> JobRecord:
        """Queue a new job (PENDING) for ``submission``, with the cluster's next job id."""
        record = self._record
        job_id = record.next_job_id
        record.next_job_id += 1
        job = JobRecord(
            job_id=job_id,
            name=submission.task.name,
            user=submission.user,
            request_id=submission.request_id,
            submitted_at=now.timestamp(),
            num_nodes=submission.task.num_nodes,
            resources=submission.task.resources.describe(),
            task_id=f"skyhop-{now:%Y-%m-%d-%H-%M-%S-%f}_{record.name}_{job_id}",
            demand=demand_of(submission.task),
        )
        record.jobs.append(job)
        self._by_request[job.request_id] = job
        self._pending[job_id] = job
        self.submissions[job_id] = submission
        self._sizes[job_id] = _size(submission)
        return job

    # --- moving jobs -------------------------------------------------------------------------------

    def mark(self, job: JobRecord, status: JobStatus) -> None:
        """Move a job to ``status``, keeping the indexes in step."""
        if not job.status.done and status.done:
            self._finished += 1
            self.submissions.pop(job.job_id, None)
            self._sizes.pop(job.job_id, None)
        job.status = status
        self._pending.pop(job.job_id, None)
        if status.done:
            self._started.pop(job.job_id, None)
        elif status != JobStatus.PENDING:
            self._started[job.job_id] = job

    def stopping(self, job: JobRecord) -> None:
        """An ended job whose processes are being stopped: its resources stay taken meanwhile."""
        self._stopping[job.job_id] = job

    def stopped(self, job: JobRecord) -> None:
        self._stopping.pop(job.job_id, None)

    def is_stopping(self, job: JobRecord) -> bool:
        """Whether the job's processes are being stopped by whoever ended it (a cancel's kill)."""
        return job.job_id in self._stopping

    def to_start(self, handle: ClusterHandle) -> list[tuple[JobRecord, list[NodeAllocation]]]:
        """The queued jobs that fit now, in order, each with its placement, moved to SETTING_UP."""
        if not self._pending:
            return []
        taken = [job.placement for job in self._started.values()]
        taken += [job.placement for job in self._stopping.values()]
        placements = schedule(capacity_of(handle), taken, self._demands())
        heads = itertools.islice(self._pending.values(), len(placements))
        started = list(zip(heads, placements, strict=True))
        for job, placement in started:
            job.placement = placement
            self.mark(job, JobStatus.SETTING_UP)
        return started

    def _demands(self) -> Iterator[Demand]:
        """Lazily: ``schedule`` stops at the first job that does not fit, so the rest cost nothing."""
        for job in self._pending.values():
            yield job.demand or demand_of(self.submission(job).task)

    # --- bounding the record -----------------------------------------------------------------------

    def trim_if_long(self) -> None:
        """Drop the oldest ended jobs once well over ``KEEP_FINISHED_JOBS`` (rarely: it is a scan)."""
        if self._finished > KEEP_FINISHED_JOBS + _TRIM_SLACK:
            self.trim()

    def trim(self) -> None:
        """Keep only the newest ``KEEP_FINISHED_JOBS`` ended jobs in the record."""
        jobs = self._record.jobs
        done = [job.job_id for job in jobs if job.status.done]
        dropped = set(done[: max(len(done) - KEEP_FINISHED_JOBS, 0)])
        for job in jobs:
            if job.job_id in dropped:
                self._by_request.pop(job.request_id, None)
        self._record.jobs = [job for job in jobs if job.job_id not in dropped]
        self._finished -= len(dropped)


def _size(submission: JobSubmission) -> int:
    return len(submission.model_dump_json())
